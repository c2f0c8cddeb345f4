"""Encoding responses into frames, with fetch records left in their segment files.

A Fetch response carries each partition's records as length-prefixed bytes, followed in
flexible versions only by that partition's tagged fields. So the frame can be cut into
"encoded bytes, then file region, then encoded bytes...": the response is encoded with a
16-byte random token in place of each partition's records, the tokens are found again (in
order) and each is replaced by its real length prefix and the file region, which the server
sends with ``loop.sendfile`` (zero copy on plaintext sockets).

The regions are reopened through ``/proc/self/fd`` when that exists: asyncio's sendfile
moves the file offset (``lseek``) and a duplicated descriptor would share it with the
storage engine's handle; a reopened one does not, and it stays readable even if the segment
is deleted before the response is written. Elsewhere the records are copied into the frame.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Any, BinaryIO

from sdk.protocol.framing import ServerFraming
from sdk.protocol.primitives import INT32, write_uvarint

__all__ = ["FileRecords", "OutgoingFrame", "encode_frame", "zero_copy_available"]

FETCH_KEY = 1
FETCH_FIRST_FLEXIBLE = 12
TOKEN_SIZE = 16
_PROC_FD = "/proc/self/fd"


def zero_copy_available() -> bool:
    return hasattr(os, "sendfile") and os.path.isdir(_PROC_FD)


class FileRecords:
    """One partition's records as regions of segment files, on private descriptors."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[tuple[BinaryIO, int, int]], size: int) -> None:
        self.chunks = chunks
        self.size = size

    @classmethod
    def reopen(cls, chunks: list[tuple[Any, int, int]], size: int) -> FileRecords:
        """Private read-only handles on the storage engine's open segment files."""
        opened: dict[int, BinaryIO] = {}
        out: list[tuple[BinaryIO, int, int]] = []
        try:
            for file, position, length in chunks:
                fd = file.fileno()
                handle = opened.get(fd)
                if handle is None:
                    handle = open(f"{_PROC_FD}/{fd}", "rb", buffering=0)
                    opened[fd] = handle
                out.append((handle, position, length))
        except OSError:
            for handle in opened.values():
                handle.close()
            raise
        return cls(out, size)

    def close(self) -> None:
        seen: set[int] = set()
        for file, _, _ in self.chunks:
            if id(file) not in seen:
                seen.add(id(file))
                with contextlib.suppress(OSError):
                    file.close()
        self.chunks = []

    def __len__(self) -> int:
        return self.size


class OutgoingFrame:
    """A response frame as encoded byte pieces and file regions, sent in order."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[bytes | FileRecords]) -> None:
        self.parts = parts

    def close(self) -> None:
        for part in self.parts:
            if isinstance(part, FileRecords):
                part.close()


def encode_frame(api_key: int, version: int, correlation_id: int,
                 response: Any) -> bytes | OutgoingFrame:
    if api_key != FETCH_KEY:
        return ServerFraming.encode_response(api_key, version, correlation_id, response)
    regions: dict[bytes, FileRecords] = {}
    for topic in response.responses:
        for partition in topic.partitions:
            records = partition.records
            if isinstance(records, FileRecords):
                token = secrets.token_bytes(TOKEN_SIZE)
                regions[token] = records
                partition.records = token
    encoded = ServerFraming.encode_response(api_key, version, correlation_id, response)
    if not regions:
        return encoded
    return _splice(encoded, regions, flexible=version >= FETCH_FIRST_FLEXIBLE)


def _splice(encoded: bytes, regions: dict[bytes, FileRecords], *, flexible: bool
            ) -> OutgoingFrame:
    parts: list[bytes | FileRecords] = []
    start = 0
    total = len(encoded) - 4
    prefix_len = 1 if flexible else 4  # a 16-byte token's length prefix: uvarint 17 or int32
    for token, records in regions.items():
        pos = encoded.find(token, start)
        if pos < 0:
            raise RuntimeError("fetch records token vanished from the encoded response")
        head = bytearray(encoded[start:pos - prefix_len])
        if flexible:
            write_uvarint(head, records.size + 1)
        else:
            head += INT32.pack(records.size)
        total += len(head) - (pos - start) + records.size - TOKEN_SIZE
        parts.append(bytes(head))
        parts.append(records)
        start = pos + TOKEN_SIZE
    parts.append(encoded[start:])
    first = bytearray(parts[0])  # type: ignore[arg-type]
    INT32.pack_into(first, 0, total)
    parts[0] = bytes(first)
    return OutgoingFrame(parts)
