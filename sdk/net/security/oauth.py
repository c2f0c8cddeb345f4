"""SASL/OAUTHBEARER (RFC 7628) on the client: where tokens come from and the messages sent.

A token comes from the application's ``sasl_oauth_token_provider`` -- a function, or a
coroutine function, taking no arguments and returning one of

* an :class:`OAuthBearerToken` (the token, its expiry in epoch milliseconds, extensions),
* a tuple ``(token, expires_at_ms)`` or ``(token, expires_at_ms, extensions)``,
* the token alone (its expiry is then read from the JWT's ``exp`` claim when it has one),

or, without a provider, from Java's *unsecured* login options in ``sasl.jaas.config``
(``unsecuredLoginStringClaim_sub="alice"`` ...): an unsigned JWS (``"alg":"none"``) made
here exactly for Kafka's default, unsecured validator -- for development only.

A token is reused until 80% of its life has passed (Java's login refresh does the same), so
new connections and re-authentications do not call the provider each time.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sdk.errors import ConfigError, SaslAuthenticationFailedError

__all__ = ["OAuthBearerToken", "TokenSource", "client_message", "unsecured_token"]

_UNSECURED = "unsecuredLogin"
_REFRESH_AT = 0.8  # share of a token's life after which a new one is asked for


@dataclass(frozen=True)
class OAuthBearerToken:
    """A bearer token: ``value`` (a JWT), ``expires_at_ms`` (epoch milliseconds, None if
    unknown) and SASL extensions (RFC 7628 key/value pairs, e.g. a cluster id)."""

    value: str = field(repr=False)
    expires_at_ms: int | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt_expiry_ms(token: str) -> int | None:
    """The ``exp`` claim of a JWT in epoch milliseconds, or None if it is not readable."""
    parts = token.split(".")
    if len(parts) < 2:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(payload).get("exp")
    except (ValueError, AttributeError):
        return None
    return int(float(exp) * 1000) if isinstance(exp, (int, float)) else None


def unsecured_token(options: Mapping[str, str], now_ms: int | None = None) -> OAuthBearerToken:
    """The unsigned token Java's unsecured login handler makes from its JAAS options."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    principal_claim = options.get(f"{_UNSECURED}PrincipalClaimName", "sub")
    scope_claim = options.get(f"{_UNSECURED}ScopeClaimName", "scope")
    try:
        lifetime_s = int(options.get(f"{_UNSECURED}LifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError(f"{_UNSECURED}LifetimeSeconds must be an integer",
                          key="sasl.jaas.config") from None
    claims: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith(f"{_UNSECURED}StringClaim_"):
            claims[key.split("_", 1)[1]] = value
        elif key.startswith(f"{_UNSECURED}NumberClaim_"):
            try:
                claims[key.split("_", 1)[1]] = json.loads(value)
            except ValueError:
                raise ConfigError(f"{key} must be a number", key="sasl.jaas.config") from None
        elif key.startswith(f"{_UNSECURED}ListClaim_"):
            # The first character is the delimiter: ",read,write".
            claims[key.split("_", 1)[1]] = [v for v in value[1:].split(value[:1]) if v] \
                if value else []
        elif key.startswith(f"{_UNSECURED}Extension_"):
            extensions[key.split("_", 1)[1]] = value
    if principal_claim not in claims:
        raise ConfigError(f"the unsecured OAUTHBEARER login needs the principal claim: "
                          f"{_UNSECURED}StringClaim_{principal_claim}=\"...\"",
                          key="sasl.jaas.config")
    if scope_claim in claims and isinstance(claims[scope_claim], str):
        claims[scope_claim] = [claims[scope_claim]]
    claims.setdefault("iat", now_ms / 1000)
    claims.setdefault("exp", now_ms / 1000 + lifetime_s)
    header = _b64url(json.dumps({"alg": "none"}).encode())
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return OAuthBearerToken(f"{header}.{body}.", int(float(claims["exp"]) * 1000),
                            extensions)


def _as_token(result: Any) -> OAuthBearerToken:
    if isinstance(result, OAuthBearerToken):
        return result
    if isinstance(result, str):
        return OAuthBearerToken(result, _jwt_expiry_ms(result))
    if isinstance(result, tuple) and len(result) in (2, 3) and isinstance(result[0], str):
        extensions = dict(result[2]) if len(result) == 3 and result[2] else {}
        expiry = None if result[1] is None else int(result[1])
        return OAuthBearerToken(result[0], expiry, extensions)
    raise SaslAuthenticationFailedError(
        "OAUTHBEARER: sasl_oauth_token_provider must return an OAuthBearerToken, a token "
        f"string or (token, expires_at_ms[, extensions]), not {type(result).__name__}")


class TokenSource:
    """Gives the current token, asking the provider (or the unsecured options) when the
    last one is 80% through its life. One per network client."""

    def __init__(self, provider: Callable[[], Any] | None,
                 unsecured_options: Mapping[str, str] | None) -> None:
        self._provider = provider
        self._options = dict(unsecured_options or {})
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0
        self._lock: asyncio.Lock | None = None

    async def token(self) -> OAuthBearerToken:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = time.time()
            if self._token is not None and now < self._refresh_at:
                return self._token
            token = await self._fetch()
            expires = token.expires_at_ms
            self._token = token
            self._refresh_at = (now + (expires / 1000 - now) * _REFRESH_AT
                                if expires is not None else 0.0)
            return token

    async def _fetch(self) -> OAuthBearerToken:
        if self._provider is None:
            return unsecured_token(self._options)
        try:
            result = self._provider()
            if inspect.isawaitable(result):
                result = await result
        except SaslAuthenticationFailedError:
            raise
        except Exception as exc:
            raise SaslAuthenticationFailedError(
                f"OAUTHBEARER: sasl_oauth_token_provider raised {type(exc).__name__}: {exc}",
                cause=exc) from exc
        return _as_token(result)


def client_message(token: OAuthBearerToken) -> bytes:
    """RFC 7628's initial client response: ``n,,^Aauth=Bearer <token>^A<key=value^A>...^A``."""
    parts = [f"auth=Bearer {token.value}"]
    for key, value in token.extensions.items():
        if not key.isalpha() or key == "auth":
            raise SaslAuthenticationFailedError(
                f"OAUTHBEARER: extension name {key!r} is not allowed (letters only, not 'auth')")
        parts.append(f"{key}={value}")
    return ("n,," + "\x01" + "\x01".join(parts) + "\x01\x01").encode()
