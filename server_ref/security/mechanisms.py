"""What every SASL mechanism shares, JAAS option parsing, and PLAIN (RFC 4616).

A mechanism server takes the client's tokens one at a time (``evaluate``) and answers the
next server token; it raises ``AuthFailure`` to end the exchange. ``public`` failures carry
a message meant for the client (Kafka's SaslAuthenticationException); any other failure is
answered with Kafka's generic "invalid credentials" text, which does not tell whether the
user exists.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Protocol

from sdk.errors import ConfigError

__all__ = ["AuthFailure", "MechanismServer", "PlainServer", "parse_jaas"]

_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class AuthFailure(Exception):
    """Authentication failed; ``public``: the message may be shown to the client."""

    def __init__(self, message: str, public: bool = False) -> None:
        super().__init__(message)
        self.public = public


class MechanismServer(Protocol):
    complete: bool
    username: str | None

    def evaluate(self, token: bytes) -> bytes: ...


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """``LoginModuleClass required name="value" ...;`` -> (class, options)."""
    body = text.strip()
    if body.endswith(";"):
        body = body[:-1]
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ConfigError(f"{key}: expected 'LoginModule required option=\"value\" ...;'",
                          key=key)
    options: dict[str, str] = {}
    rest = parts[2] if len(parts) > 2 else ""
    pos = 0
    while rest[pos:].strip():
        match = _JAAS_OPTION.match(rest, pos)
        if match is None:
            # Named by position only: the text around it may hold passwords.
            raise ConfigError(f"cannot read option {len(options) + 1} of the login module's "
                              'options (expected name="value")', key=key)
        value = match.group(2)
        options[match.group(1)] = (re.sub(r"\\(.)", r"\1", value) if value is not None
                                   else match.group(3))
        pos = match.end()
    return parts[0], options


class PlainServer:
    """SASL/PLAIN against ``user_NAME="password"`` entries of the listener's JAAS config."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got "
                              f"{len(parts)}", public=True)
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthFailure("Invalid SASL/PLAIN response: not UTF-8", public=True) from None
        if not user:
            raise AuthFailure("Authentication failed: username not specified", public=True)
        if not password:
            raise AuthFailure("Authentication failed: password not specified", public=True)
        expected = self.users.get(user)
        # compare_digest even for an unknown user, so timing does not tell users apart
        if not hmac.compare_digest((expected or "\0unknown").encode(), password.encode()) \
                or expected is None:
            raise AuthFailure("Authentication failed: Invalid username or password",
                              public=True)
        if authzid and authzid != user:
            raise AuthFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username", public=True)
        self.username = user
        self.complete = True
        return b""
