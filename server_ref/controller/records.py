"""Metadata records: what the controller writes to ``__cluster_metadata``.

Our own encoding, one JSON object per record value (Kafka uses its generated metadata record
schemas; only our nodes read this log, and JSON keeps it readable with any tool). Kinds:

- ``register_broker`` {id, epoch, incarnation, host, port, rack, listeners}: a broker
  (re)registered, fenced until it has caught up with the log; ``listeners`` maps each of its
  listener names to [host, port], host/port being its inter-broker listener;
- ``broker_state`` {id, epoch, fenced, shutting_down}: fenced / unfenced;
- ``topic`` {name, id, configs}; ``remove_topic`` {id}; ``topic_configs`` {topic_id, configs};
- ``partition`` {topic_id, partition, replicas, isr, leader, leader_epoch, partition_epoch,
  adding, removing}: the full state of a partition after a change (a new partition, an ISR
  change, an election, a reassignment step);
- ``broker_configs`` {resource, configs}: dynamic broker configs ("" is the cluster default,
  else a broker id), the whole level after a change (``config_records.py``);
- ``group_configs`` {group, configs}: a group's config overrides after a change, none
  when empty (``group_configs.py``; Kafka's ConfigRecords of GROUP resources);
- ``acl`` {id, resource_type, name, pattern_type, principal, host, operation, permission},
  ``remove_acl`` {id}; ``scram_credential`` {user, mechanism, salt, stored_key, server_key,
  iterations}, ``remove_scram_credential`` {user, mechanism} (``acl_records.py``; Kafka's
  AccessControlEntryRecord, UserScramCredentialRecord and their removals);
- ``producer_ids`` {broker, epoch, next}: a block of producer ids handed to a broker
  (AllocateProducerIds, ``producer_ids.py``; Kafka's ProducerIdsRecord);
- ``cluster`` {cluster_id}: written once by the first active controller.
"""

from __future__ import annotations

import json
from typing import Any

from server_ref.controller.image import PartitionImage

__all__ = ["decode", "encode", "partition_record"]

Record = dict[str, Any]


def encode(record: Record) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def decode(value: bytes) -> Record:
    record = json.loads(value)
    if not isinstance(record, dict) or "type" not in record:
        raise ValueError(f"not a metadata record: {value[:80]!r}")
    return record


def partition_record(topic_id: str, index: int, p: PartitionImage) -> Record:
    return {"type": "partition", "topic_id": topic_id, "partition": index, **p.to_json()}
