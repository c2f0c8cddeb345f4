"""ProducerConfig: the producer's settings, validated (pydantic v2) with Kafka's names and rules.

Build it like every role config (see :mod:`sdk.net.config`): keyword arguments and/or a
``config`` mapping with dotted names. Besides the shared connection settings it holds:

====================================== =========== =========================================
setting                                default     meaning
====================================== =========== =========================================
acks                                   "all" (-1)  0, 1 or "all"/-1
linger_ms                              5           wait this long for a batch to fill
batch_size                             16384       bytes per partition batch (uncompressed)
buffer_memory                          33554432    bytes of unsent batches before send blocks
max_block_ms                           60000       how long send may block (metadata, buffer)
max_request_size                       1048576     largest record / Produce request
compression_type                       "none"      none, gzip, snappy, lz4, zstd
retries                                2147483647  resend attempts of a batch
delivery_timeout_ms                    120000      send-to-acknowledgement limit per record
max_in_flight_requests_per_connection  5           unanswered Produce requests per broker
enable_idempotence                     True        exactly-once per partition; needs acks=all
partitioner                            "default"   name, Partitioner object or callable
partitioner_ignore_keys                False       send keyed records through the sticky path
key_serializer / value_serializer      None        callables object -> bytes, or a name
transactional_id                       None        makes the producer transactional
transaction_timeout_ms                 60000       the coordinator aborts a transaction older
====================================== =========== =========================================

Cross-field rules, as Java applies them (KIP-679): idempotence needs ``acks=all``,
``retries > 0`` and at most 5 in-flight requests. When ``enable_idempotence`` was *not*
given and another setting conflicts, idempotence is quietly turned off; when it was given
as true, the conflict is a ConfigError. A ``transactional_id`` implies idempotence:
with it, ``enable_idempotence=False`` or a conflicting setting is a ConfigError. ``delivery_timeout_ms`` must be at least
``linger_ms + request_timeout_ms`` (raised to that when it was not given).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, field_validator, model_validator

from sdk.errors import ConfigError
from sdk.net.config import CommonConfig, NonNegativeInt, PositiveInt
from sdk.net.serde import serializer_named
from sdk.producer.partitioner import Partitioner, make_partitioner

__all__ = ["ProducerConfig"]

_producer_ids = itertools.count(1)
MAX_IDEMPOTENT_IN_FLIGHT = 5  # the broker remembers the last 5 batches per producer
_ACKS_NAMES = {"all": -1, "-1": -1, "0": 0, "1": 1}


def _parse_acks(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("acks is 0, 1 or 'all', not a boolean")
    if isinstance(value, str) and value.strip().lower() in _ACKS_NAMES:
        return _ACKS_NAMES[value.strip().lower()]
    if value in (-1, 0, 1) and not isinstance(value, float):
        return value
    raise ValueError("acks must be 0, 1 or 'all' (or -1)")


Acks = Annotated[Literal[-1, 0, 1], BeforeValidator(_parse_acks)]
Serializer = Callable[[Any], "bytes | None"]


class ProducerConfig(CommonConfig):
    """Producer settings; see the module docstring for the table and the rules."""

    acks: Acks = -1
    linger_ms: NonNegativeInt = 5
    batch_size: NonNegativeInt = 16_384
    buffer_memory: PositiveInt = 32 * 1024 * 1024
    max_block_ms: NonNegativeInt = 60_000
    max_request_size: PositiveInt = 1_048_576
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    retries: NonNegativeInt = 2_147_483_647
    delivery_timeout_ms: PositiveInt = 120_000
    max_in_flight_requests_per_connection: PositiveInt = 5
    enable_idempotence: bool = True
    partitioner: Any = "default"
    partitioner_ignore_keys: bool = False
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: PositiveInt = 60_000

    _role: ClassVar[str] = "P"

    @classmethod
    def default_client_id(cls) -> str:
        return f"kafka-sdk-producer-{next(_producer_ids)}"

    @field_validator("compression_type", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("partitioner")
    @classmethod
    def _check_partitioner(cls, value: Any) -> Any:
        if isinstance(value, str) or isinstance(value, Partitioner) or callable(value):
            return value
        raise ValueError("expected a partitioner name, a Partitioner object or a callable")

    @field_validator("key_serializer", "value_serializer", mode="before")
    @classmethod
    def _check_serializer(cls, value: Any) -> Any:
        if isinstance(value, str):  # a Java class name or a short name (sdk.net.serde)
            return serializer_named(value)
        if value is not None and not callable(value):
            raise ValueError("expected a callable taking the object and returning bytes, "
                             "or a built-in serializer's name")
        return value

    @property
    def acks_name(self) -> str:
        return "all" if self.acks == -1 else str(self.acks)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> ProducerConfig:
        explicit = self.model_fields_set
        conflicts: list[tuple[str, str]] = []
        if self.acks != -1:
            conflicts.append(("acks", f"acks={self.acks_name} (idempotence needs acks='all')"))
        if self.retries == 0:
            conflicts.append(("retries", "retries=0 (idempotence needs retries > 0)"))
        if self.max_in_flight_requests_per_connection > MAX_IDEMPOTENT_IN_FLIGHT:
            conflicts.append((
                "max_in_flight_requests_per_connection",
                f"max_in_flight_requests_per_connection="
                f"{self.max_in_flight_requests_per_connection} (idempotence allows at most "
                f"{MAX_IDEMPOTENT_IN_FLIGHT})",
            ))
        if self.transactional_id == "":
            self.transactional_id = None  # Java and librdkafka read an empty id as none
        if self.transactional_id is not None:
            if not self.enable_idempotence and "enable_idempotence" in explicit:
                raise ConfigError("a transactional producer is idempotent: remove "
                                  "enable_idempotence=False or the transactional_id",
                                  key="enable_idempotence", value=False)
            if conflicts:
                key, why = conflicts[0]
                raise ConfigError(f"conflicts with transactional_id (transactions need "
                                  f"idempotence): {why}", key=key, value=getattr(self, key))
            self.enable_idempotence = True
        if self.enable_idempotence and conflicts:
            if "enable_idempotence" in explicit:
                key, why = conflicts[0]
                raise ConfigError(
                    f"conflicts with enable_idempotence=True: {why}; set enable_idempotence="
                    f"False or change {key}",
                    key=key, value=getattr(self, key),
                )
            self.enable_idempotence = False  # KIP-679: implicit default yields to the user
        floor = self.linger_ms + self.request_timeout_ms
        if self.delivery_timeout_ms < floor:
            if "delivery_timeout_ms" in explicit:
                raise ConfigError(
                    f"must be at least linger_ms + request_timeout_ms = {floor}",
                    key="delivery_timeout_ms", value=self.delivery_timeout_ms,
                    allowed=f"a number >= {floor}",
                )
            self.delivery_timeout_ms = floor
        if isinstance(self.partitioner, str):
            try:
                make_partitioner(self.partitioner)
            except ValueError as exc:
                raise ConfigError(str(exc), key="partitioner", value=self.partitioner,
                                  allowed=("default", "murmur2", "uniform_sticky",
                                           "round_robin")) from None
        return self
