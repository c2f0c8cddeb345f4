"""SASL on a connection: SaslHandshake, SaslAuthenticate and KIP-368 re-authentication, with
Kafka's rules (SaslServerAuthenticator and the socket server).

Before authentication only ApiVersions (first, once; again after a KIP-511 answer to a
version the broker does not know), SaslHandshake and then SaslAuthenticate are served; anything else, an unparsable frame or a frame over ``sasl.server.max.receive.size``
closes the connection. SaslHandshake v0 switches to raw tokens (size-prefixed, no Kafka
header), v1 to SaslAuthenticate requests. An unsupported mechanism is answered with
UNSUPPORTED_SASL_MECHANISM and the enabled list, a failed exchange with
SASL_AUTHENTICATION_FAILED and a message (raw tokens: no answer); both then close, after
``connection.failed.authentication.delay.ms`` (100 ms, as Kafka: it slows password guessing
and lets the client read the answer before the end of the stream).

The session lifetime (SaslAuthenticate v1+ ``session_lifetime_ms``) is the smaller of
``connections.max.reauth.ms`` (listener- and mechanism-prefixed forms first) and the
credential's expiry (an OAUTHBEARER token's ``exp``); when neither is set there is none. A
connection whose session has expired is closed at its next request, unless that request is a
SaslHandshake, which starts a re-authentication: same mechanism, same principal (Kafka
refuses a change), while requests already in flight carry on. Without a session lifetime, or
less than a second after the previous re-authentication began (Kafka's
``KafkaChannel.maybeBeginServerReauthentication``: at most one a second; the first
authentication does not count), a SaslHandshake after authentication goes to the API handler
(ILLEGAL_SASL_STATE) and the connection stays open, as in Kafka.

The authentication phase must end within ``connections.max.idle.ms`` of the connection's
start (for SASL_SSL the TLS handshake has the same bound); Kafka closes such connections
through its idle timeout, and an unauthenticated connection's only activity is the exchange.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sdk.errors import ConfigError, MalformedDataError, UnsupportedVersionError
from sdk.protocol.framing import ServerFraming, frame
from sdk.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from server_ref.security.credentials import CredentialStore
from server_ref.security.listeners import listener_value
from server_ref.security.mechanisms import (
    AuthFailure,
    MechanismServer,
    PlainServer,
    parse_jaas,
)
from server_ref.security.oauth import OAuthBearerServer
from server_ref.security.scram import MECHANISMS as SCRAM_MECHANISMS
from server_ref.security.scram import ScramServer

if TYPE_CHECKING:
    from server_ref.server import Connection

log = logging.getLogger(__name__)

MIN_REAUTH_INTERVAL_S = 1.0  # Kafka: at most one re-authentication a second per connection

__all__ = ["SUPPORTED_MECHANISMS", "SaslGate", "SaslSettings", "sasl_settings"]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
DEFAULT_MAX_RECEIVE = 524288  # Kafka's sasl.server.max.receive.size
DEFAULT_FAILURE_DELAY_MS = 100  # Kafka's connection.failed.authentication.delay.ms


@dataclass(slots=True)
class SaslSettings:
    """One listener's SASL configuration."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    oauth_options: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: dict[str, int] = field(default_factory=dict)  # per mechanism, 0: none
    max_receive: int = DEFAULT_MAX_RECEIVE
    failure_delay_ms: int = DEFAULT_FAILURE_DELAY_MS
    credentials: CredentialStore | None = field(default=None, repr=False)


def sasl_settings(settings: Mapping[str, str], listener: str,
                  credentials: CredentialStore) -> SaslSettings:
    text = listener_value(settings, listener, "sasl.enabled.mechanisms")
    if text is None:
        raise ConfigError(f"listener {listener} uses SASL: set sasl.enabled.mechanisms (Kafka's "
                          "default, GSSAPI, is not implemented by this broker; it supports "
                          + ", ".join(SUPPORTED_MECHANISMS) + ")",
                          key="sasl.enabled.mechanisms")
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unknown or not mechanisms:
        raise ConfigError(f"sasl.enabled.mechanisms: {', '.join(unknown) or 'empty'} is not "
                          "supported; use " + ", ".join(SUPPORTED_MECHANISMS),
                          key="sasl.enabled.mechanisms", value=text)
    out = SaslSettings(mechanisms, credentials=credentials)
    for mechanism in mechanisms:
        jaas = listener_value(settings, listener, "sasl.jaas.config", mechanism)
        options = parse_jaas(jaas)[1] if jaas is not None else {}
        if mechanism == "PLAIN":
            if jaas is None:
                raise ConfigError(
                    f"listener {listener} enables PLAIN but has no users: set listener.name."
                    f"{listener.lower()}.plain.sasl.jaas.config to 'org.apache.kafka.common."
                    'security.plain.PlainLoginModule required user_NAME="PASSWORD";\'',
                    key=f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
            out.plain_users = {k[5:]: v for k, v in options.items() if k.startswith("user_")}
        elif mechanism == "OAUTHBEARER":
            out.oauth_options = options
        reauth = listener_value(settings, listener, "connections.max.reauth.ms", mechanism)
        try:
            out.reauth_ms[mechanism] = max(0, int(reauth)) if reauth is not None else 0
        except ValueError:
            raise ConfigError(f"connections.max.reauth.ms={reauth} is not a number",
                              key="connections.max.reauth.ms", value=reauth) from None
    for key, attribute in (("sasl.server.max.receive.size", "max_receive"),
                           ("connection.failed.authentication.delay.ms", "failure_delay_ms")):
        text = listener_value(settings, listener, key)
        try:
            if text is not None:
                setattr(out, attribute, max(0, int(text)))
        except ValueError:
            raise ConfigError(f"{key}={text} is not a number", key=key, value=text) from None
    return out


class State(enum.Enum):
    INITIAL = 0  # ApiVersions or SaslHandshake
    HANDSHAKE = 1  # after ApiVersions: SaslHandshake
    AUTHENTICATE = 2  # SaslAuthenticate requests (handshake v1)
    RAW = 3  # raw tokens (handshake v0)
    DONE = 4
    FAILED = 5


class SaslGate:
    """The SASL side of one connection. ``intercept`` sees every frame first."""

    def __init__(self, conn: Connection, settings: SaslSettings) -> None:
        self.conn = conn
        self.settings = settings
        self.state = State.INITIAL
        self.mechanism: str | None = None
        self.server: MechanismServer | None = None
        self.expires_at: float | None = None  # monotonic seconds; None: no session limit
        self.reauthenticating = False
        self.reauth_began: float | None = None  # monotonic start of the last re-authentication

    # ------------------------------------------------------------------ frames

    def intercept(self, payload: bytes) -> bool:
        """True when the frame was handled here; False to dispatch it as a request."""
        state = self.state
        if state is State.DONE:
            return self._authenticated(payload)
        if state is State.FAILED:
            return True
        if state is State.RAW:
            self._raw_token(payload)
            return True
        try:
            req = ServerFraming.parse(payload)
        except (MalformedDataError, UnsupportedVersionError) as exc:
            self._close(f"undecodable request during SASL authentication: {exc}")
            return True
        if state is State.INITIAL and req.api_key == API_VERSIONS and not self.reauthenticating:
            # Served by the ApiVersions handler. A version we do not know gets KIP-511's v0
            # answer and the client may ask again, as Kafka's authenticator allows.
            if req.request is not None:
                self.state = State.HANDSHAKE
            return False
        if req.request is None:
            self._close(f"API {req.api_key} v{req.api_version} during SASL authentication")
            return True
        if state in (State.INITIAL, State.HANDSHAKE) and req.api_key == SASL_HANDSHAKE:
            self._handshake(req.api_version, req.correlation_id,
                            cast(SaslHandshakeRequest, req.request))
            return True
        if state is State.AUTHENTICATE and req.api_key == SASL_AUTHENTICATE:
            self._authenticate(req.api_version, req.correlation_id,
                               cast(SaslAuthenticateRequest, req.request))
            return True
        phase = "handshake" if state is not State.AUTHENTICATE else "authentication"
        self._close(f"unexpected request (API {req.api_key}) during SASL {phase}")
        return True

    def _authenticated(self, payload: bytes) -> bool:
        api_key = int.from_bytes(payload[:2], "big", signed=True) if len(payload) >= 2 else -1
        if api_key == SASL_HANDSHAKE and self.expires_at is not None and (
                self.reauth_began is None
                or time.monotonic() - self.reauth_began >= MIN_REAUTH_INTERVAL_S):
            try:
                req = ServerFraming.parse(payload)
            except (MalformedDataError, UnsupportedVersionError) as exc:
                self._close(f"undecodable SaslHandshake: {exc}")
                return True
            if req.request is None:
                self._close(f"SaslHandshake v{req.api_version} is not supported")
                return True
            self.reauthenticating = True
            self.reauth_began = time.monotonic()
            self._handshake(req.api_version, req.correlation_id,
                            cast(SaslHandshakeRequest, req.request))
            return True
        if self.expires_at is not None and time.monotonic() > self.expires_at:
            self.conn.server.security_stats["expired"] += 1
            self._close("the SASL session expired without re-authentication (KIP-368)",
                        quiet=True)
            return True
        return False

    # ------------------------------------------------------------------ exchange

    def _handshake(self, version: int, correlation_id: int, req: SaslHandshakeRequest) -> None:
        mechanism = req.mechanism
        enabled = list(self.settings.mechanisms)
        if mechanism not in enabled:
            self._fail(SASL_HANDSHAKE, version, correlation_id,
                       SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM,
                                             mechanisms=enabled),
                       f"unsupported SASL mechanism {mechanism!r}")
            return
        self._respond(SASL_HANDSHAKE, version, correlation_id,
                      SaslHandshakeResponse(error_code=0, mechanisms=enabled))
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka refuses the mechanism change at the first token of the re-authentication
            # (closing the connection without an answer).
            self.server = _Refuse(f"SASL mechanism '{mechanism}' requested by client is not "
                                  "supported for re-authentication of mechanism "
                                  f"'{self.mechanism}'")
        else:
            self.mechanism = mechanism
            self.server = self._mechanism_server(mechanism)
        self.state = State.AUTHENTICATE if version >= 1 else State.RAW

    def _mechanism_server(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self.settings.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            store = self.settings.credentials
            return ScramServer(mechanism, store.get if store is not None else _no_credentials)
        return OAuthBearerServer(self.settings.oauth_options)

    def _authenticate(self, version: int, correlation_id: int,
                      req: SaslAuthenticateRequest) -> None:
        server = self.server
        assert server is not None
        if isinstance(server, _Refuse):
            # Kafka fails a re-authentication with another mechanism at its first token,
            # without an answer.
            self.conn.server.security_stats["failed"] += 1
            self._close(server.message)
            return
        try:
            token = server.evaluate(bytes(req.auth_bytes))
            lifetime_ms = self._finish(server) if server.complete else 0
        except AuthFailure as exc:
            message = str(exc) if exc.public else (
                f"Authentication failed during {self._phase()} due to invalid credentials with "
                f"SASL mechanism {self.mechanism}")
            self._fail(SASL_AUTHENTICATE, version, correlation_id,
                       SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                                error_message=message),
                       f"SASL {self._phase()} failed ({self.mechanism}): {exc}")
            return
        self._respond(SASL_AUTHENTICATE, version, correlation_id,
                      SaslAuthenticateResponse(error_code=0, auth_bytes=token,
                                               session_lifetime_ms=lifetime_ms))

    def _raw_token(self, payload: bytes) -> None:
        server = self.server
        assert server is not None
        try:
            token = server.evaluate(payload)
            if server.complete:
                self._finish(server)
        except AuthFailure as exc:
            # Raw tokens (handshake v0) have no place for an error: Kafka just closes.
            self.conn.server.security_stats["failed"] += 1
            self._close(f"SASL {self._phase()} failed ({self.mechanism}): {exc}")
            return
        self.conn._enqueue_ready(frame(token))

    def _finish(self, server: MechanismServer) -> int:
        """Authentication complete: the principal, the session's end; the lifetime in ms."""
        principal = f"User:{server.username}"
        if self.reauthenticating and principal != self.conn.principal:
            raise AuthFailure("Cannot change principals during re-authentication from "
                              f"{self.conn.principal.replace(':', '.', 1)}: "
                              f"{principal.replace(':', '.', 1)}", public=True)
        now_ms = time.time_ns() // 1_000_000
        reauth_ms = self.settings.reauth_ms.get(self.mechanism or "", 0)
        expiry_ms = getattr(server, "expires_ms", None)
        lifetimes = ([reauth_ms] if reauth_ms > 0 else []) + (
            [expiry_ms - now_ms] if expiry_ms is not None else [])
        lifetime_ms = max(0, min(lifetimes)) if lifetimes else 0
        self.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetimes else None
        stats = self.conn.server.security_stats
        stats["reauthenticated" if self.reauthenticating else "authenticated"] += 1
        self.conn.principal = principal
        self.reauthenticating = False
        self.state = State.DONE
        self.server = None
        self.conn.authenticated()
        log.debug("%s authenticated as %s with %s, session %s ms", self.conn.peer, principal,
                  self.mechanism, lifetime_ms if lifetimes else "unlimited")
        return lifetime_ms

    def _phase(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # ------------------------------------------------------------------ output

    def _respond(self, api_key: int, version: int, correlation_id: int, response: Any) -> None:
        self.conn._enqueue_ready(ServerFraming.encode_response(api_key, version,
                                                               correlation_id, response))

    def _fail(self, api_key: int, version: int, correlation_id: int, response: Any,
              reason: str) -> None:
        self.conn.server.security_stats["failed"] += 1
        self._respond(api_key, version, correlation_id, response)
        self.state = State.FAILED
        self.conn.close_after_writes(reason, self.settings.failure_delay_ms / 1000)

    def _close(self, reason: str, quiet: bool = False) -> None:
        self.state = State.FAILED
        if quiet:
            log.info("closing connection from %s: %s", self.conn.peer, reason)
            self.conn.closed = True
            if self.conn.transport is not None:
                self.conn.transport.abort()
        else:
            self.conn.abort(reason)


class _Refuse:
    """Stands in for a mechanism whose use is refused: fails at its first token."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise AuthFailure(self.message, public=True)


def _no_credentials(user: str, mechanism: str) -> None:
    return None
