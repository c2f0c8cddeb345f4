"""Tiered-storage settings: the broker's switch and store location, each topic's policy, and
Kafka's rules for turning remote storage on and off (its checks, in its order, with its
messages; every refusal is INVALID_CONFIG).

- ``remote.storage.enable=true`` needs ``remote.log.storage.system.enable=true`` on the broker
  and a topic without "compact" in ``cleanup.policy``; ``local.retention.bytes`` / ``.ms``
  (-2: follow ``retention.*``) may not be -1 or above ``retention.*`` when that is bounded;
  with ``remote.log.copy.disable=true`` local and total retention must be equal.
- Turning it off is allowed only together with ``remote.log.delete.on.disable=true`` (the
  remote data is deleted); keeping the remote data read-only is
  ``remote.storage.enable=true, remote.log.copy.disable=true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from sdk.errors import InvalidConfigError

__all__ = ["TopicTiering", "effective", "store_location", "topic_tiering", "validate_topic"]

FOLLOW_RETENTION = -2


def effective(overrides: Mapping[str, Any], broker: Any, key: str) -> Any:
    """A topic config as the topic sees it: its override, else the broker's default."""
    if key in overrides:
        return overrides[key]
    return broker.topic_default(key)


@dataclass(frozen=True, slots=True)
class TopicTiering:
    """One topic's tiered-storage policy, from its configs and the broker's defaults."""

    enabled: bool
    copy_disabled: bool
    retention_ms: int  # both tiers; -1 unlimited
    retention_bytes: int
    local_retention_ms: int  # resolved: -2 replaced by retention.ms
    local_retention_bytes: int

    @property
    def copies(self) -> bool:
        return self.enabled and not self.copy_disabled


def topic_tiering(overrides: Mapping[str, Any], broker: Any) -> TopicTiering:
    def value(key: str) -> Any:
        return effective(overrides, broker, key)

    retention_ms, retention_bytes = int(value("retention.ms")), int(value("retention.bytes"))
    local_ms, local_bytes = int(value("local.retention.ms")), int(value("local.retention.bytes"))
    return TopicTiering(
        enabled=bool(value("remote.storage.enable"))
        and bool(broker.get("remote.log.storage.system.enable")),
        copy_disabled=bool(value("remote.log.copy.disable")),
        retention_ms=retention_ms, retention_bytes=retention_bytes,
        local_retention_ms=retention_ms if local_ms == FOLLOW_RETENTION else local_ms,
        local_retention_bytes=retention_bytes if local_bytes == FOLLOW_RETENTION else local_bytes,
    )


def _invalid_value(key: str, value: int, message: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value} for configuration {key}: {message}")


def validate_topic(existing: Mapping[str, Any], new: Mapping[str, Any], broker: Any) -> None:
    """Kafka's checks of a topic's remote-storage configs (``existing``/``new``: the topic's
    overrides before and after the change, parsed). Raises ``InvalidConfigError``."""
    def value(key: str) -> Any:
        return effective(new, broker, key)

    enabled = bool(value("remote.storage.enable"))
    if not enabled:
        was = bool(effective(existing, broker, "remote.storage.enable")) if existing else False
        if was and not value("remote.log.delete.on.disable"):
            raise InvalidConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                "disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
        return
    if not broker.get("remote.log.storage.system.enable"):
        raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. "
                                 "Topic cannot be configured with remote log storage.")
    if "compact" in value("cleanup.policy"):
        raise InvalidConfigError("Remote log storage is unsupported for the compacted topics")
    for total_key, local_key, unlimited in (("retention.bytes", "local.retention.bytes", -1),
                                            ("retention.ms", "local.retention.ms", -1)):
        total, local = int(value(total_key)), int(value(local_key))
        if total > unlimited and local != FOLLOW_RETENTION:
            if local == -1:
                raise _invalid_value(local_key, local, f"Value must not be -1 as {total_key} "
                                                       f"value is set as {total}.")
            if local > total:
                raise _invalid_value(local_key, local, "Value must not be more than "
                                                       f"{total_key} property value: {total}")
    if value("remote.log.copy.disable"):
        for total_key, local_key in (("retention.bytes", "local.retention.bytes"),
                                     ("retention.ms", "local.retention.ms")):
            local = int(value(local_key))
            if local != FOLLOW_RETENTION and local != int(value(total_key)):
                raise InvalidConfigError(
                    f"When `remote.log.copy.disable` is set to true, the `{local_key}` and "
                    f"`{total_key}` must be set to the identical value because there will be "
                    "no more logs copied to the remote storage.")


def store_location(broker: Any, data_dir: Any) -> str:
    """The remote tier's URI: the configured one, else a directory in the data directory."""
    uri = str(broker.get("remote.log.storage.uri") or "")
    if not uri:
        return f"file://{data_dir}/remote-storage"
    parsed = urlparse(uri)
    problem = ""
    if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
        # file://data/tier would silently mean /tier on host "data"
        problem = f": a file URI takes an absolute path (file:///abs/path), not host " \
                  f"{parsed.netloc!r}"
    elif parsed.scheme == "s3" and not parsed.netloc:
        problem = ": no bucket named"
    if parsed.scheme not in ("file", "s3") or problem:
        raise InvalidConfigError(
            f"remote.log.storage.uri must be file:///path or s3://bucket/prefix, got "
            f"{uri!r}{problem}")
    return uri
