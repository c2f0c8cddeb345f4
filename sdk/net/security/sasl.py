"""SASL on a Kafka connection: SaslHandshake (v1) then SaslAuthenticate round trips.

Kafka's order (KIP-152): ApiVersions, then SaslHandshake naming the mechanism (the broker
answers UNSUPPORTED_SASL_MECHANISM with the ones it has), then the mechanism's messages
each in a SaslAuthenticate request. SaslAuthenticate v1+ answers ``session_lifetime_ms``
(KIP-368): the connection must authenticate again before it ends, on the same connection
(:mod:`sdk.net.connection` schedules that). Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256/512
(:mod:`.scram`), OAUTHBEARER (:mod:`.oauth`).

Every failure is an :class:`sdk.errors.AuthenticationError` subclass naming the mechanism,
the broker and the broker's own message; credentials never appear in one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sdk.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    for_code,
)
from sdk.net.security.oauth import TokenSource, client_message
from sdk.net.security.scram import ScramClient
from sdk.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["MECHANISMS", "SaslSettings", "authenticate"]

log = logging.getLogger(__name__)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SASL_HANDSHAKE = 17
_SASL_AUTHENTICATE = 36
_MAX_ROUNDS = 4  # no supported mechanism needs more; a broker asking for more is broken

# send(request, version) -> response, written straight to the socket (also during a
# re-authentication, when the connection holds back every other request).
Exchange = Callable[[Any, int], Awaitable[Any]]
VersionFor = Callable[[int], int]


@dataclass(frozen=True)
class SaslSettings:
    """What one client authenticates with. ``password`` stays out of reprs."""

    mechanism: str
    username: str = ""
    password: str = field(default="", repr=False)
    tokens: TokenSource | None = field(default=None, repr=False)


class _Mechanism:
    """One exchange: ``initial()`` then ``respond(challenge)`` until it returns None."""

    async def initial(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError


class _Plain(_Mechanism):
    def __init__(self, settings: SaslSettings) -> None:
        self._settings = settings

    async def initial(self) -> bytes:
        s = self._settings
        return b"\0" + s.username.encode() + b"\0" + s.password.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class _Scram(_Mechanism):
    def __init__(self, settings: SaslSettings) -> None:
        self._client = ScramClient(settings.mechanism, settings.username, settings.password)
        self._step = 0

    async def initial(self) -> bytes:
        return self._client.first()

    def respond(self, challenge: bytes) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return self._client.final(challenge)
        self._client.verify(challenge)
        return None


class _OAuthBearer(_Mechanism):
    def __init__(self, settings: SaslSettings) -> None:
        assert settings.tokens is not None
        self._tokens = settings.tokens
        self.error_status: str | None = None

    async def initial(self) -> bytes:
        return client_message(await self._tokens.token())

    def respond(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None
        # RFC 7628 3.2.2: a refused token draws a JSON error; the client answers ^A and
        # the broker then fails the exchange (its error message follows).
        self.error_status = challenge.decode("utf-8", "replace")[:200]
        return b"\x01"


_FACTORIES: dict[str, Callable[[SaslSettings], _Mechanism]] = {
    "PLAIN": _Plain, "SCRAM-SHA-256": _Scram, "SCRAM-SHA-512": _Scram,
    "OAUTHBEARER": _OAuthBearer,
}


async def authenticate(settings: SaslSettings, exchange: Exchange, version_for: VersionFor,
                       where: str, *, again: bool = False) -> int:
    """Run the handshake and the exchange (``again``: a KIP-368 re-authentication); return
    the session lifetime in ms (0: none).

    ``where`` names the broker in errors (``127.0.0.1:9093 (node 1)``)."""
    name = settings.mechanism
    try:
        hs_version = version_for(_SASL_HANDSHAKE)
        auth_version = version_for(_SASL_AUTHENTICATE)
    except UnsupportedVersionError as exc:
        raise IllegalSaslStateError(
            f"{name}: broker {where} does not offer SASL (no SaslHandshake/SaslAuthenticate "
            "in ApiVersions): is this a SASL listener?", cause=exc) from exc
    if hs_version < 1:
        raise IllegalSaslStateError(f"{name}: broker {where} only knows SaslHandshake v0 "
                                    "(Kafka before 1.0), which is not supported")
    handshake = await exchange(SaslHandshakeRequest(mechanism=name), hs_version)
    assert isinstance(handshake, SaslHandshakeResponse)
    if handshake.error_code == UnsupportedSaslMechanismError.errno:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise UnsupportedSaslMechanismError(
            f"{name} is not enabled on broker {where}; it offers: {offered}")
    if handshake.error_code:
        hint = ""
        if handshake.error_code == IllegalSaslStateError.errno:
            hint = (" (re-authentication refused: the broker takes one a second per "
                    "connection)" if again else
                    " (the listener takes no SASL: is security_protocol right for this port?)")
        raise for_code(handshake.error_code)(f"{name} handshake with broker {where}{hint}")
    mechanism = _FACTORIES[name](settings)
    message: bytes | None = await mechanism.initial()
    rounds = 0
    while message is not None:
        rounds += 1
        if rounds > _MAX_ROUNDS:
            raise IllegalSaslStateError(f"{name}: broker {where} keeps asking for more "
                                        f"after {_MAX_ROUNDS} rounds")
        response = await exchange(SaslAuthenticateRequest(auth_bytes=message), auth_version)
        assert isinstance(response, SaslAuthenticateResponse)
        if response.error_code:
            detail = response.error_message or ""
            status = getattr(mechanism, "error_status", None)
            if status and status not in detail:
                detail = f"{detail} (token refused: {status})".strip()
            raise for_code(response.error_code)(
                f"{name} authentication with broker {where} failed: {detail or 'no reason given'}")
        try:
            message = mechanism.respond(bytes(response.auth_bytes))
        except SaslAuthenticationFailedError as exc:
            raise SaslAuthenticationFailedError(f"{exc.message} (broker {where})") from None
    lifetime = response.session_lifetime_ms if auth_version >= 1 else 0
    return max(0, int(lifetime))
