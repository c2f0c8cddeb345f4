"""The metadata image: the cluster as the committed metadata log describes it.

Every node keeps one: the controllers (to decide) and every broker (to serve). It changes
only by ``apply`` of committed records (``records.py``), in log order, so all nodes that
applied the same prefix hold the same image. ``to_snapshot``/``from_snapshot`` carry it in a
Raft snapshot, so a restarted node need not replay the whole log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BrokerImage", "MetadataImage", "PartitionImage", "TopicImage"]

NO_LEADER = -1


@dataclass(slots=True)
class BrokerImage:
    node_id: int
    epoch: int  # the broker epoch: the metadata offset of its registration
    incarnation: str
    host: str
    port: int
    rack: str | None = None
    fenced: bool = True
    shutting_down: bool = False
    # Every listener the broker registered: name -> (host, port); host/port above are the
    # first one, its inter-broker listener.
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.node_id, "epoch": self.epoch, "incarnation": self.incarnation,
                "host": self.host, "port": self.port, "rack": self.rack,
                "fenced": self.fenced, "shutting_down": self.shutting_down,
                "listeners": {n: list(e) for n, e in self.endpoints.items()}}

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """Where clients of ``listener`` reach this broker (None: the inter-broker one);
        None when the broker has no such listener."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        return self.endpoints.get(listener)


def _endpoints(record: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {name: (str(e[0]), int(e[1])) for name, e in (record.get("listeners") or {}).items()}


@dataclass(slots=True)
class PartitionImage:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in progress: the target replicas and who is being added/removed.
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"replicas": self.replicas, "isr": self.isr, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "adding": self.adding, "removing": self.removing}

    def copy(self) -> PartitionImage:
        return PartitionImage(list(self.replicas), list(self.isr), self.leader,
                              self.leader_epoch, self.partition_epoch, list(self.adding),
                              list(self.removing))


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: str  # the UUID as text
    configs: dict[str, str] = field(default_factory=dict)
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerImage] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topic_ids: dict[str, str] = {}  # id -> name
        # Ids of deleted topics: a broker deletes a local log only for these (or for a
        # name now used by another id), never because its image has not caught up yet.
        self.removed_topic_ids: set[str] = set()
        self.broker_configs: dict[str, dict[str, str]] = {}  # "" = cluster default
        # Group configs: group id -> its overrides (``group_configs.py``).
        self.group_configs: dict[str, dict[str, Any]] = {}
        # ACL bindings by id and SCRAM credentials by (user, mechanism), as the
        # acl/scram records of server_ref.controller.acl_records carry them.
        self.acls: dict[str, dict[str, Any]] = {}
        self.scram: dict[tuple[str, str], dict[str, Any]] = {}
        # Bumped by every change of those (brokers reload their stores when it moves).
        self.security_version = 0
        self.configs_version = 0
        self.offset = -1  # the last applied log offset
        self.cluster_id: str | None = None
        # The first producer id of the next block AllocateProducerIds hands out.
        self.next_producer_id = 0

    # ------------------------------------------------------------------ reading

    def live_brokers(self) -> list[BrokerImage]:
        return [b for b in sorted(self.brokers.values(), key=lambda b: b.node_id)
                if not b.fenced]

    def partition(self, topic: str, index: int) -> PartitionImage | None:
        found = self.topics.get(topic)
        return None if found is None else found.partitions.get(index)

    # ------------------------------------------------------------------ changing

    def apply(self, record: dict[str, Any]) -> None:
        """Apply one committed record (see ``records.py`` for the kinds)."""
        kind = record["type"]
        if kind == "register_broker":
            self.brokers[record["id"]] = BrokerImage(
                record["id"], record["epoch"], record["incarnation"], record["host"],
                record["port"], record.get("rack"), fenced=True,
                endpoints=_endpoints(record))
        elif kind == "broker_state":
            broker = self.brokers.get(record["id"])
            if broker is not None and broker.epoch == record["epoch"]:
                broker.fenced = record["fenced"]
                broker.shutting_down = record.get("shutting_down", False)
        elif kind == "unregister_broker":
            self.brokers.pop(record["id"], None)
        elif kind == "topic":
            self.topics[record["name"]] = TopicImage(record["name"], record["id"],
                                                     dict(record.get("configs") or {}))
            self.topic_ids[record["id"]] = record["name"]
        elif kind == "partition":
            name = self.topic_ids.get(record["topic_id"])
            if name is not None:
                self.topics[name].partitions[record["partition"]] = PartitionImage(
                    list(record["replicas"]), list(record["isr"]), record["leader"],
                    record.get("leader_epoch", 0), record.get("partition_epoch", 0),
                    list(record.get("adding") or []), list(record.get("removing") or []))
        elif kind == "remove_topic":
            self.removed_topic_ids.add(record["id"])
            name = self.topic_ids.pop(record["id"], None)
            if name is not None:
                self.topics.pop(name, None)
        elif kind == "topic_configs":
            name = self.topic_ids.get(record["topic_id"])
            if name is not None:
                self.topics[name].configs = dict(record["configs"])
        elif kind == "broker_configs":
            self.broker_configs[record["resource"]] = dict(record["configs"])
            self.configs_version += 1
        elif kind == "group_configs":
            if record["configs"]:
                self.group_configs[record["group"]] = dict(record["configs"])
            else:
                self.group_configs.pop(record["group"], None)
            self.configs_version += 1
        elif kind == "acl":
            self.acls[record["id"]] = {k: v for k, v in record.items()
                                       if k not in ("type", "id")}
            self.security_version += 1
        elif kind == "remove_acl":
            self.acls.pop(record["id"], None)
            self.security_version += 1
        elif kind == "scram_credential":
            self.scram[(record["user"], record["mechanism"])] = {
                k: v for k, v in record.items() if k not in ("type", "user", "mechanism")}
            self.security_version += 1
        elif kind == "remove_scram_credential":
            self.scram.pop((record["user"], record["mechanism"]), None)
            self.security_version += 1
        elif kind == "cluster":
            self.cluster_id = record["cluster_id"]
        elif kind == "producer_ids":
            self.next_producer_id = max(self.next_producer_id, int(record["next"]))
        # Unknown kinds are skipped: a newer controller's record an older broker ignores.

    # ------------------------------------------------------------------ snapshots

    def to_snapshot(self) -> bytes:
        data = {
            "offset": self.offset,
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "brokers": [b.to_json() for b in self.brokers.values()],
            "topics": [{"name": t.name, "id": t.topic_id, "configs": t.configs,
                        "partitions": {str(i): p.to_json() for i, p in t.partitions.items()}}
                       for t in self.topics.values()],
            "broker_configs": self.broker_configs,
            "group_configs": self.group_configs,
            "removed_topic_ids": sorted(self.removed_topic_ids),
            "acls": self.acls,
            "scram": [{"user": u, "mechanism": m, **c} for (u, m), c in self.scram.items()],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_snapshot(cls, payload: bytes, offset: int) -> MetadataImage:
        data = json.loads(payload)
        image = cls()
        image.offset = offset
        image.cluster_id = data.get("cluster_id")
        image.next_producer_id = int(data.get("next_producer_id", 0))
        for b in data["brokers"]:
            image.brokers[b["id"]] = BrokerImage(
                b["id"], b["epoch"], b["incarnation"], b["host"], b["port"], b.get("rack"),
                b["fenced"], b.get("shutting_down", False), _endpoints(b))
        for t in data["topics"]:
            topic = TopicImage(t["name"], t["id"], dict(t["configs"]))
            for index, p in t["partitions"].items():
                topic.partitions[int(index)] = PartitionImage(
                    p["replicas"], p["isr"], p["leader"], p["leader_epoch"],
                    p["partition_epoch"], p.get("adding") or [], p.get("removing") or [])
            image.topics[topic.name] = topic
            image.topic_ids[topic.topic_id] = topic.name
        image.broker_configs = {k: dict(v) for k, v in data.get("broker_configs", {}).items()}
        image.group_configs = {k: dict(v) for k, v in data.get("group_configs", {}).items()}
        image.removed_topic_ids = set(data.get("removed_topic_ids", ()))
        image.acls = {k: dict(v) for k, v in data.get("acls", {}).items()}
        image.scram = {(c["user"], c["mechanism"]): {
            k: v for k, v in c.items() if k not in ("user", "mechanism")}
            for c in data.get("scram", ())}
        image.security_version = image.configs_version = 1  # a new image: reload both
        return image
