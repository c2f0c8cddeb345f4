"""How a broker authenticates to other brokers when its inter-broker listener is secured.

With ``inter.broker.listener.name`` naming an SSL, SASL_PLAINTEXT or SASL_SSL listener,
every broker-to-broker connection (replica fetches, appends to internal topics at their
leaders, transaction markers) speaks that listener's protocol, as Kafka's brokers do: TLS
trusting the listener's ``ssl.truststore.*`` (host names checked unless
``ssl.endpoint.identification.algorithm`` is empty) and offering its key store as the
client certificate (mutual TLS), then SASL with
``sasl.mechanism.inter.broker.protocol`` (PLAIN or SCRAM-SHA-256/512) and the ``username``
/ ``password`` of that mechanism's ``listener.name.<listener>.<mechanism>.sasl.jaas.config``.
The connections to the controllers stay on their PLAINTEXT listener. The principal brokers
authenticate as needs CLUSTER_ACTION (a super user), as in Kafka.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sdk.errors import ConfigError, SaslAuthenticationFailedError
from sdk.protocol.framing import ClientFraming
from sdk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from server_ref.security.listeners import listener_value
from server_ref.security.mechanisms import parse_jaas
from server_ref.security.tls import client_context

__all__ = ["PeerSecurity", "peer_security"]

MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True)
class PeerSecurity:
    ssl_context: ssl.SSLContext | None
    mechanism: str | None  # None: TLS only
    username: str = ""
    password: str = field(default="", repr=False)

    async def open(self, host: str, port: int, client_id: str
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``host:port``, TLS set up and SASL done."""
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self.ssl_context,
            server_hostname=host if self.ssl_context is not None else None)
        if self.mechanism is not None:
            try:
                await self._authenticate(reader, writer, ClientFraming(client_id=client_id))
            except SaslAuthenticationFailedError as exc:
                # A connection failure to every caller: they retry (the user may not exist
                # yet, e.g. a SCRAM login made through the controller after start).
                writer.close()
                raise ConnectionError(f"{host}:{port}: {exc}") from exc
            except BaseException:
                writer.close()
                raise
        return reader, writer

    async def _authenticate(self, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter, framing: ClientFraming) -> None:
        assert self.mechanism is not None
        handshake = await _call(reader, writer, framing,
                                SaslHandshakeRequest(mechanism=self.mechanism), 1)
        if handshake.error_code:
            raise SaslAuthenticationFailedError(
                f"inter-broker SASL: the broker does not offer {self.mechanism} "
                f"(it offers {', '.join(handshake.mechanisms)})")
        if self.mechanism == "PLAIN":
            await self._step(reader, writer, framing,
                             f"\0{self.username}\0{self.password}".encode())
            return
        digest = MECHANISMS[self.mechanism]
        assert digest is not None
        nonce = base64.b64encode(os.urandom(18)).decode()
        bare = f"n={_sasl_name(self.username)},r={nonce}"
        first = (await self._step(reader, writer, framing, f"n,,{bare}".encode())).decode()
        attrs = dict(item.split("=", 1) for item in first.split(","))
        if not attrs.get("r", "").startswith(nonce):
            raise SaslAuthenticationFailedError("inter-broker SCRAM: the server nonce does "
                                                "not extend ours")
        salted = hashlib.pbkdf2_hmac(digest, self.password.encode(),
                                     base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        stored_key = hashlib.new(digest, client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{bare},{first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        final = await self._step(reader, writer, framing, (
            f"{without_proof},p={base64.b64encode(proof).decode()}").encode())
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        expected = hmac.new(server_key, auth_message, digest).digest()
        if final != b"v=" + base64.b64encode(expected):
            raise SaslAuthenticationFailedError("inter-broker SCRAM: the server's signature "
                                                "does not match")

    async def _step(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    framing: ClientFraming, token: bytes) -> bytes:
        answer = await _call(reader, writer, framing,
                             SaslAuthenticateRequest(auth_bytes=token), 2)
        if answer.error_code:
            raise SaslAuthenticationFailedError(
                f"inter-broker SASL {self.mechanism} as {self.username}: "
                f"{answer.error_message or answer.error_code}")
        return bytes(answer.auth_bytes)


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                framing: ClientFraming, request: Any, version: int) -> Any:
    writer.write(framing.encode_request(request, version)[1])
    while True:
        data = await reader.read(1 << 16)
        if not data:
            raise ConnectionError("the broker closed the connection during authentication")
        for _cid, response in framing.feed(data):
            return response


def _sasl_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def peer_security(settings: Mapping[str, str], listener: str, protocol: str
                  ) -> PeerSecurity | None:
    """What connecting to other brokers' ``listener`` (of ``protocol``) takes; None for
    PLAINTEXT. ConfigError, naming the setting, for what is missing or unsupported."""
    if protocol == "PLAINTEXT":
        return None
    context = client_context(settings, listener) if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "SSL":
        return PeerSecurity(context, None)
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = (settings.get(key) or "").strip().upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"{key}: the inter-broker listener {listener} uses SASL; set it to "
                          f"one of {', '.join(MECHANISMS)} (got {mechanism or 'nothing'})",
                          key=key, value=mechanism)
    jaas = listener_value(settings, listener, "sasl.jaas.config", mechanism)
    if jaas is None:
        raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}."
                          "sasl.jaas.config: the inter-broker login needs username and "
                          "password options", key="sasl.jaas.config")
    _module, options = parse_jaas(jaas)
    if "username" not in options or "password" not in options:
        raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}."
                          "sasl.jaas.config: the inter-broker login needs username and "
                          "password options", key="sasl.jaas.config")
    return PeerSecurity(context, mechanism, options["username"], options["password"])
