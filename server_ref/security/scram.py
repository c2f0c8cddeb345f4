"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): the stored credential and the
server side of the exchange.

A credential is what Kafka keeps: salt, iterations, StoredKey = H(HMAC(SaltedPassword,
"Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"); never the password. The
client sends the salted password in AlterUserScramCredentials and the broker derives the two
keys from it, as Kafka's controller does.

Failures follow Kafka's ScramSaslServer: an unknown user or a wrong proof fails with the
generic "invalid credentials" answer (the broker's message must not reveal which), a
malformed message with its reason; delegation tokens (``tokenauth=true``) are not supported.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from server_ref.security.mechanisms import AuthFailure

__all__ = ["MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "ScramCredential", "ScramServer",
           "derive_credential", "salted_password"]

# AlterUserScramCredentials mechanism numbers (Kafka's ScramMechanism type) and hashes.
MECHANISMS: dict[str, tuple[int, str]] = {"SCRAM-SHA-256": (1, "sha256"),
                                          "SCRAM-SHA-512": (2, "sha512")}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, as Kafka prints "[hidden]"
        return f"ScramCredential(iterations={self.iterations}, salt=[hidden], keys=[hidden])"


def _hmac(digest: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, digest).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    digest = MECHANISMS[mechanism][1]
    return hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)


def derive_credential(mechanism: str, salted: bytes, salt: bytes, iterations: int
                      ) -> ScramCredential:
    digest = MECHANISMS[mechanism][1]
    client_key = _hmac(digest, salted, b"Client Key")
    return ScramCredential(salt=salt, stored_key=hashlib.new(digest, client_key).digest(),
                           server_key=_hmac(digest, salted, b"Server Key"),
                           iterations=iterations)


class ScramFailure(AuthFailure):
    """A SCRAM exchange failed."""


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramFailure("Invalid SCRAM message: an attribute is not a=value")
        out.setdefault(key, value)
    return out


def _sasl_name(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramFailure("Invalid username: bad escape")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self.username: str | None = None
        self.complete = False
        self._state = 0
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        # The server's half of the nonce; fixed only by tests (RFC 7677's example).
        self._server_nonce = server_nonce

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure("Invalid SCRAM message: not UTF-8") from None
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise ScramFailure("Unexpected SCRAM message after the exchange ended")

    def _first(self, text: str) -> bytes:
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep and sep2) or flag not in ("n", "y"):
            if flag.startswith("p"):
                raise ScramFailure("Channel binding is not supported", public=True)
            raise ScramFailure("Invalid SCRAM client first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramFailure("Invalid SCRAM client first message: no user or nonce")
        user = _sasl_name(attrs["n"])
        if attrs.get("tokenauth", "").lower() == "true" or "tokenauth=true" in bare.lower():
            raise ScramFailure("Delegation tokens are not supported by this broker")
        if authzid and (not authzid.startswith("a=") or _sasl_name(authzid[2:]) != user):
            raise ScramFailure("Authentication failed: Client requested an authorization id "
                               "that is different from username", public=True)
        credential = self.lookup(user, self.mechanism)
        if credential is None:
            raise ScramFailure("Authentication failed: Invalid user credentials")
        self.username, self._credential = user, credential
        self._gs2 = text[:len(text) - len(bare)]
        self._client_first_bare = bare
        self._nonce = attrs["r"] + (self._server_nonce
                                    or base64.b64encode(secrets.token_bytes(24)).decode())
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        proof_at = text.rfind(",p=")
        if proof_at < 0:
            raise ScramFailure("Authentication failed: Invalid client final message")
        without_proof = text[:proof_at]
        attrs = _attributes(without_proof)
        try:
            proof = base64.b64decode(text[proof_at + 3:], validate=True)
            binding = base64.b64decode(attrs.get("c", ""), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise ScramFailure("Authentication failed: Invalid client final message") from None
        if attrs.get("r") != self._nonce:
            raise ScramFailure("Invalid client nonce in the final client message.")
        if binding != self._gs2:
            raise ScramFailure("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = _hmac(self.digest, credential.stored_key, auth_message.encode())
        if len(proof) != len(signature):
            raise ScramFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(),
                                   credential.stored_key):
            raise ScramFailure("Invalid client credentials")
        server_signature = _hmac(self.digest, credential.server_key, auth_message.encode())
        self._state = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
