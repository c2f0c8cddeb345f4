"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWS tokens, validated as Kafka's default
validator (OAuthBearerUnsecuredValidatorCallbackHandler) does.

The token is ``base64url(header).base64url(claims).`` with ``"alg": "none"`` and an empty
signature. Checks, in Kafka's order: the principal claim (``sub`` unless
``unsecuredValidatorPrincipalClaimName``) is a string; ``iat``, when present, is not in the
future; ``exp`` exists and has not passed; ``exp`` is after ``iat``; the token's scope (the
``scope`` claim, a string of space-separated values or a list) holds every value of
``unsecuredValidatorRequiredScope``. ``unsecuredValidatorAllowableClockSkewMs`` loosens the
time checks. Times are seconds since the epoch (possibly fractional).

A refused token is answered as Kafka answers it: a JSON error (``{"status":"invalid_token"}``)
as the server's challenge, which the client acknowledges with ``0x01``; then the exchange
fails with that JSON as the message. ``expires_ms`` bounds the KIP-368 session.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Any

from server_ref.security.mechanisms import AuthFailure

__all__ = ["OAuthBearerServer", "validate_unsecured_jws"]


class InvalidToken(Exception):
    def __init__(self, message: str, status: str = "invalid_token",
                 scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope


def _b64url(part: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidToken("a token part is not base64url-encoded JSON") from None


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"the {name} claim is not a number")
    return float(value)


def validate_unsecured_jws(token: str, options: Mapping[str, str], now_ms: int
                           ) -> tuple[str, int]:
    """(principal name, expiry in ms) of a valid token; raises InvalidToken."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("an unsecured JWS has three dot-separated parts")
    if parts[2]:
        raise InvalidToken("the token is signed; only unsecured tokens (alg none) are "
                           "accepted")
    header, claims = _b64url(parts[0]), _b64url(parts[1])
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise InvalidToken("the JOSE header's alg must be none")
    if not isinstance(claims, dict):
        raise InvalidToken("the claims are not a JSON object")
    skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
    principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidToken(f"the {principal_claim} claim is missing or not a string")
    # Claim times to whole milliseconds, rounded as Kafka rounds them.
    issued = _number(claims, "iat")
    issued_ms = None if issued is None else round(issued * 1000)
    if issued_ms is not None and issued_ms > now_ms + skew:
        raise InvalidToken("the token was issued in the future (iat)")
    expires = _number(claims, "exp")
    if expires is None:
        raise InvalidToken("the exp claim is missing")
    expires_ms = round(expires * 1000)
    if now_ms - skew >= expires_ms:
        raise InvalidToken("the token has expired (exp)")
    if issued_ms is not None and expires_ms <= issued_ms:
        raise InvalidToken("the token expires before it was issued (exp <= iat)")
    required = options.get("unsecuredValidatorRequiredScope", "").split()
    if required:
        claim = claims.get(options.get("unsecuredValidatorScopeClaimName", "scope"))
        scope = claim.split() if isinstance(claim, str) else (
            [s for s in claim if isinstance(s, str)] if isinstance(claim, list) else [])
        missing = [s for s in required if s not in scope]
        if missing:
            raise InvalidToken("the token lacks the required scope " + " ".join(missing),
                               status="insufficient_scope", scope=" ".join(required))
    return principal, expires_ms


class OAuthBearerServer:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options
        self.complete = False
        self.username: str | None = None
        self.expires_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise AuthFailure(self._error, public=True)
        self._error = None
        authzid, value = _initial_response(token)
        try:
            principal, expires_ms = validate_unsecured_jws(value, self.options,
                                                           time.time_ns() // 1_000_000)
        except InvalidToken as exc:
            error = {"status": exc.status}
            if exc.scope is not None:
                error["scope"] = exc.scope
            self._error = json.dumps(error, separators=(",", ":"))
            return self._error.encode()
        if authzid and authzid != principal:
            raise AuthFailure("Authentication failed: Client requested an authorization id "
                              f"({authzid}) that is different from the token's principal name "
                              f"({principal})", public=True)
        self.username, self.expires_ms, self.complete = principal, expires_ms, True
        return b""


def _initial_response(token: bytes) -> tuple[str, str]:
    """(authorization id, token) of ``n,[a=authzid],^Aauth=Bearer TOKEN^A[k=v^A]*^A``."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthFailure("Invalid OAUTHBEARER client first message: not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    fields = gs2.split(",")
    if not sep or len(fields) != 3 or fields[0] not in ("n", "y") or fields[2]:
        raise AuthFailure("Invalid OAUTHBEARER client first message")
    authzid = fields[1][2:] if fields[1].startswith("a=") else ""
    if fields[1] and not fields[1].startswith("a="):
        raise AuthFailure("Invalid OAUTHBEARER client first message: authorization id")
    if not rest.endswith("\x01\x01"):
        raise AuthFailure("Invalid OAUTHBEARER client first message: no terminator")
    pairs = dict(kv.partition("=")[::2] for kv in rest[:-2].split("\x01") if kv)
    auth = pairs.get("auth", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise AuthFailure("Invalid OAUTHBEARER client first message: no bearer token")
    return authzid, value.strip()
