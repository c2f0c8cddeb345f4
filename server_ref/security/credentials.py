"""SCRAM credentials of one broker, kept in ``scram_credentials.json`` in the data dir.

Kafka keeps them in the KRaft metadata log (UserScramCredentialRecord); this broker runs one
node with no metadata log, so the file (written atomically at each change) plays that part:
credentials survive a restart. It holds what Kafka holds, salt, StoredKey, ServerKey and
iterations per user and mechanism, base64-encoded; never a password. In cluster mode the
metadata log holds them (``server_ref.controller.acl_records``): each broker's store is
replaced from its replay and the file is not written.
"""

from __future__ import annotations

import base64
from pathlib import Path

from server_ref.config import read_json, write_json_atomically
from server_ref.security.scram import ScramCredential

__all__ = ["CREDENTIALS_FILE", "CredentialStore"]

CREDENTIALS_FILE = "scram_credentials.json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class CredentialStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else Path(data_dir) / CREDENTIALS_FILE
        self.users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        data = read_json(self.path) if self.path is not None else None
        self.users = {
            user: {mechanism: ScramCredential(
                salt=base64.b64decode(c["salt"]), stored_key=base64.b64decode(c["stored_key"]),
                server_key=base64.b64decode(c["server_key"]), iterations=int(c["iterations"]))
                for mechanism, c in mechanisms.items()}
            for user, mechanisms in (data or {}).items()}

    def replace(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Hold exactly ``users`` (cluster mode: the metadata log is their durable copy,
        so nothing is written here)."""
        self.users = users

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def apply(self, upserts: dict[tuple[str, str], ScramCredential],
              deletions: list[tuple[str, str]]) -> None:
        """Apply one request's changes together and persist them."""
        for user, mechanism in deletions:
            mechanisms = self.users.get(user, {})
            mechanisms.pop(mechanism, None)
            if not mechanisms:
                self.users.pop(user, None)
        for (user, mechanism), credential in upserts.items():
            self.users.setdefault(user, {})[mechanism] = credential
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        write_json_atomically(self.path, {
            user: {mechanism: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                               "server_key": _b64(c.server_key), "iterations": c.iterations}
                   for mechanism, c in mechanisms.items()}
            for user, mechanisms in self.users.items()})
