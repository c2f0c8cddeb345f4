"""The client side of SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka speaks it.

Three messages: the client's first (user name and a fresh nonce), its final (the proof
that it knows the salted password, bound to both nonces), and a check of the server's
signature in the server's final message, so a broker that does not know the password
cannot pass for one that does. Channel binding is not used (``n,,``), as in Kafka.
Only :mod:`hashlib`, :mod:`hmac` and :mod:`secrets` are used.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from sdk.errors import SaslAuthenticationFailedError

__all__ = ["ScramClient", "scram_hash_name"]

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's brokers refuse fewer iterations than this; a server asking for fewer is not Kafka
# (or is trying to make the proof cheap to brute-force).
_MIN_ITERATIONS = 4096
_GS2_HEADER = "n,,"


def scram_hash_name(mechanism: str) -> str:
    """``SCRAM-SHA-256`` -> ``sha256`` (KeyError for anything else)."""
    return _HASHES[mechanism]


def _saslname(name: str) -> str:
    # RFC 5802 5.1: ',' and '=' in a user name are escaped.
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


class ScramClient:
    """One SCRAM exchange. ``first()`` -> bytes, ``final(server_first)`` -> bytes,
    ``verify(server_final)`` raises SaslAuthenticationFailedError unless the server proved
    it knows the password. ``nonce`` is for tests (RFC 7677's vector); leave it out."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = scram_hash_name(mechanism)
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._auth_message = ""
        self._salted = b""

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def first(self) -> bytes:
        self._client_first_bare = f"n={_saslname(self._username)},r={self._nonce}"
        return (_GS2_HEADER + self._client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        try:
            attrs = _attributes(text)
            if "e" in attrs:
                raise self._failed(f"the broker answered error {attrs['e']!r}")
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise self._failed(f"malformed server-first message ({exc})") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._failed("the server's nonce does not extend ours")
        if iterations < _MIN_ITERATIONS:
            raise self._failed(f"the server asks for {iterations} iterations "
                               f"(at least {_MIN_ITERATIONS} expected)")
        self._salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt,
                                           iterations)
        binding = base64.b64encode(_GS2_HEADER.encode()).decode()
        without_proof = f"c={binding},r={nonce}"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}"
        client_key = self._hmac(self._salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = self._hmac(stored_key, self._auth_message.encode())
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        try:
            attrs = _attributes(text)
        except ValueError as exc:
            raise self._failed(f"malformed server-final message ({exc})") from None
        if "e" in attrs:
            raise self._failed(f"the broker answered error {attrs['e']!r}")
        server_key = self._hmac(self._salted, b"Server Key")
        expected = self._hmac(server_key, self._auth_message.encode())
        try:
            given = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            given = b""
        if not hmac.compare_digest(given, expected):
            raise self._failed("the broker's signature is wrong: it does not know the "
                               "password (a broker impersonating the real one?)")

    def _failed(self, why: str) -> SaslAuthenticationFailedError:
        return SaslAuthenticationFailedError(f"{self.mechanism}: {why}")

    def __repr__(self) -> str:
        return f"<ScramClient {self.mechanism}>"
