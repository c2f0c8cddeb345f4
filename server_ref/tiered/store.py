"""Where remote segments live: a local directory (the default) or an S3-compatible store.

Both take whole objects under a key and give back byte ranges. An object is written under a
temporary name (directory) or in one PUT / multipart upload (S3) and only then named in
the metadata log as COPY_SEGMENT_FINISHED, so a reader never meets half an object.

S3 goes through boto3 (the ``tiered-s3`` extra): AWS's own SDK, released weekly, the
reference implementation of S3's signing, retries and multipart rules that S3-compatible
servers (MinIO, Ceph, moto) test against; its blocking calls run in worker threads, off the
broker's loop. Credentials come from the broker's secret configs or the library's usual
chain (environment, profile); they are never logged nor shown in ``describe()``.
"""

from __future__ import annotations

import glob
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlparse

__all__ = ["DirectoryStore", "RemoteStorageError", "RemoteStore", "S3Store", "open_store"]


class RemoteStorageError(Exception):
    """The remote tier failed (unreachable, refused, object missing)."""


class RemoteStore(ABC):
    @abstractmethod
    def put_file(self, key: str, f: BinaryIO, size: int) -> None:
        """Store the first ``size`` bytes of ``f`` (read from its current position)."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def get_range(self, key: str, start: int, length: int) -> bytes:
        """Bytes [start, start + length) of the object (fewer at its end)."""

    @abstractmethod
    def get(self, key: str) -> bytes: ...

    @abstractmethod
    def delete(self, keys: list[str]) -> None:
        """Delete the objects; missing ones are no error."""

    @abstractmethod
    def list(self, prefix: str) -> list[str]: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, without credentials."""

    def close(self) -> None:
        return None


class DirectoryStore(RemoteStore):
    """Objects as files under a root directory; a key's slashes are subdirectories."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise RemoteStorageError(f"key {key!r} leaves the store's directory")
        return path

    def _write(self, key: str, write: Any) -> None:
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                write(out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise RemoteStorageError(f"writing {key}: {exc}") from exc

    def put_file(self, key: str, f: BinaryIO, size: int) -> None:
        def copy(out: BinaryIO) -> None:
            left = size
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    raise OSError(f"source ended {left} bytes early")
                out.write(chunk)
                left -= len(chunk)
        self._write(key, copy)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._write(key, lambda out: out.write(data))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return os.pread(f.fileno(), length, start)
        except OSError as exc:
            raise RemoteStorageError(f"reading {key}: {exc}") from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except OSError as exc:
            raise RemoteStorageError(f"reading {key}: {exc}") from exc

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            try:
                path = self._path(key)
                path.unlink(missing_ok=True)
                # what a writer killed mid-object left (a crashed broker's interrupted copy,
                # whose keys are deleted at the next start): never listed, but disk
                for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
                    leftover.unlink(missing_ok=True)
            except OSError as exc:
                raise RemoteStorageError(f"deleting {key}: {exc}") from exc

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.exists():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*")
                      if p.is_file() and not p.name.endswith(".tmp"))

    def describe(self) -> str:
        return f"file://{self.root}"


class S3Store(RemoteStore):
    """Objects in a bucket under a prefix, through boto3 (imported on first use)."""

    def __init__(self, bucket: str, prefix: str, *, endpoint: str | None, region: str,
                 access_key: str | None, secret_key: str | None,
                 timeout_s: float = 10.0) -> None:
        try:
            import boto3
            from boto3.s3.transfer import TransferConfig
            from botocore.config import Config
        except ImportError:
            raise RemoteStorageError(
                "s3:// remote storage needs boto3: pip install 'kafka-sdk[tiered-s3]'") from None
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint
        # Short timeouts and two attempts: a store that is down fails the copy (retried by
        # the next task run) or the fetch (a retriable answer) quickly, not after minutes.
        config = Config(connect_timeout=min(timeout_s, 3.0), read_timeout=timeout_s,
                        retries={"max_attempts": 2, "mode": "standard"},
                        max_pool_connections=16)
        self._client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint or None, region_name=region,
            aws_access_key_id=access_key or None, aws_secret_access_key=secret_key or None,
            config=config)
        self._transfer = TransferConfig(multipart_threshold=64 << 20,
                                        multipart_chunksize=16 << 20, use_threads=False)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except (BotoCoreError, ClientError, Boto3Error, OSError) as exc:
            raise RemoteStorageError(f"{what}: {exc}") from exc

    def put_file(self, key: str, f: BinaryIO, size: int) -> None:
        self._call(f"uploading {key}", self._client.upload_fileobj, _Limited(f, size),
                   self.bucket, self._key(key), Config=self._transfer)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call(f"uploading {key}", self._client.put_object, Bucket=self.bucket,
                   Key=self._key(key), Body=data)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        answer = self._call(f"reading {key}", self._client.get_object, Bucket=self.bucket,
                            Key=self._key(key), Range=f"bytes={start}-{start + length - 1}")
        return bytes(self._call(f"reading {key}", answer["Body"].read))

    def get(self, key: str) -> bytes:
        answer = self._call(f"reading {key}", self._client.get_object, Bucket=self.bucket,
                            Key=self._key(key))
        return bytes(self._call(f"reading {key}", answer["Body"].read))

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
            objects = [{"Key": self._key(k)} for k in keys[start:start + 1000]]
            answer = self._call("deleting objects", self._client.delete_objects,
                                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
            errors = answer.get("Errors") or []
            if errors:
                raise RemoteStorageError(f"deleting {errors[0].get('Key')}: "
                                         f"{errors[0].get('Code')}")

    def list(self, prefix: str) -> list[str]:
        out: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        strip = len(self._key(""))
        pages = self._call("listing objects", lambda: list(paginator.paginate(
            Bucket=self.bucket, Prefix=self._key(prefix))))
        for page in pages:
            out.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        return sorted(out)

    def describe(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where} at {self.endpoint}" if self.endpoint else where

    def close(self) -> None:
        self._client.close()


class _Limited:
    """A read-only file view of the first ``size`` bytes (a segment being appended to
    never is, but a file may be longer than what the metadata names)."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self._left = size

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._f.read(n)
        self._left -= len(data)
        return data


def open_store(uri: str, broker: Any) -> RemoteStore:
    """The store a ``remote.log.storage.uri`` names (see settings.store_location)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return DirectoryStore(Path(parsed.path))
    secrets = getattr(broker, "security", {})
    return S3Store(parsed.netloc, parsed.path,
                   endpoint=str(broker.get("remote.log.storage.s3.endpoint") or "") or None,
                   region=str(broker.get("remote.log.storage.s3.region")),
                   access_key=secrets.get("remote.log.storage.s3.access.key.id"),
                   secret_key=secrets.get("remote.log.storage.s3.secret.access.key"),
                   timeout_s=int(broker.get("remote.log.storage.s3.request.timeout.ms")) / 1000)
