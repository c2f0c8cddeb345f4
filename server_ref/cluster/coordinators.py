"""Group coordinators in cluster mode: on the leaders of ``__consumer_offsets`` partitions.

A group's coordinator is the leader of partition ``hash(group) % partitions`` of
``__consumer_offsets`` (Kafka's placement), found with FindCoordinator on any broker; the
topic is created through the controller on first use (replication factor
``offsets.topic.replication.factor``, capped by the live brokers, as Kafka caps it).
The journal is replicated like any partition; when this broker gains or loses the
leadership of one of its partitions, the group coordinator is rebuilt from the local log
(what the replicas have), so a new leader serves the groups the old one journaled.

Offset commits are answered only once the ISR of the group's partition has the journal
record (``replicated``), as Kafka's coordinator appends with acks=-1; a failed wait becomes
the error Kafka's coordinator runtime answers (REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS as
COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER as NOT_COORDINATOR), so the client finds
the coordinator again and retries. (The in-memory offset is not rolled back on such a
failure, unlike Kafka's runtime: a fetch on the same coordinator may see it before a retry.)

Transaction coordinators are placed the same way, on the leaders of ``__transaction_state``
partitions (``hash(transactional id) % partitions``; created through the controller on first
use with ``transaction.state.log.replication.factor`` capped by the live brokers and
``transaction.state.log.min.isr``); a leadership change of one of them makes the broker's
transaction coordinator load or drop that partition's transactional ids
(``TransactionCoordinator.leadership_changed``; the rest is in ``cluster/txn_link.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from server_ref.cluster.views import create_topic
from server_ref.controller.image import NO_LEADER
from server_ref.offsets_journal import OFFSETS_TOPIC, partition_for_group
from server_ref.transactions.statelog import STATE_TOPIC

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.handlers import RequestContext
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["CoordinatorPlacement", "find_coordinator", "replicated"]

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
NOT_AVAILABLE = CoordinatorNotAvailableError.errno


def _locate(ctx: RequestContext, key: str, key_type: int
            ) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator of ``key``."""
    agent = ctx.broker.cluster
    if key_type == TRANSACTION_KEY_TYPE:
        name, create = STATE_TOPIC, agent.placement.create_state_topic
    elif key_type == GROUP_KEY_TYPE:
        name, create = OFFSETS_TOPIC, agent.placement.create_offsets_topic
    else:
        return InvalidRequestError.errno, f"coordinator key type {key_type} unknown", -1, "", -1
    topic = agent.image.topics.get(name)
    if topic is None or not topic.partitions:
        create()
        return NOT_AVAILABLE, f"{name} is being created", -1, "", -1
    p = topic.partitions.get(partition_for_group(key, len(topic.partitions)))
    if p is None or p.leader == NO_LEADER:
        return NOT_AVAILABLE, f"the key's {name} partition has no leader", -1, "", -1
    endpoint = agent.endpoint_of(p.leader, ctx.listener)  # on the client's listener
    if endpoint is None:
        return NOT_AVAILABLE, f"broker {p.leader} is not registered", -1, "", -1
    return 0, None, p.leader, endpoint[0], endpoint[1]


def _coordinator_error(error: KafkaError) -> int:
    """Kafka's mapping of a failed coordinator write (CoordinatorOperationExceptionHelper)."""
    if isinstance(error, (UnknownTopicOrPartitionError, NotEnoughReplicasError,
                          RequestTimedOutError)):
        return NOT_AVAILABLE
    if isinstance(error, (NotLeaderOrFollowerError, KafkaStorageError)):
        return NotCoordinatorError.errno
    return int(getattr(error, "errno", -1))


async def replicated(broker: Broker, partition: Partition, codes: dict[Any, int]
                     ) -> dict[Any, int]:
    """``codes`` (a write's per-key outcome) once the ISR of ``partition`` has everything
    in its log; every success turns into the coordinator error if it does not get there."""
    last = partition.log.log_end_offset - 1
    timeout_ms = int(broker.config.get("offsets.commit.timeout.ms"))
    error = await broker.cluster.replicas.wait_for_isr(partition, last, timeout_ms)
    if error is None:
        return codes
    code = _coordinator_error(error)
    log.info("offsets on %s not replicated (%s): answering error %d", partition.name,
             error, code)
    return {key: code if c == 0 else c for key, c in codes.items()}


def find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest
                     ) -> FindCoordinatorResponse:
    key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE
    if ctx.api_version >= 4:
        out = []
        for key in req.coordinator_keys:
            error, message, node, host, port = _locate(ctx, key, key_type)
            out.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=error,
                error_message=message))
        return FindCoordinatorResponse(coordinators=out)
    error, message, node, host, port = _locate(ctx, req.key, key_type)
    return FindCoordinatorResponse(error_code=error, error_message=message, node_id=node,
                                   host=host, port=port)


class CoordinatorPlacement:
    """Rebuilds the broker's group coordinator when its offsets leaderships change."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._reload_scheduled = False
        self._creating: asyncio.Task[None] | None = None
        self._creating_state: asyncio.Task[None] | None = None

    def create_offsets_topic(self) -> None:
        if self._creating is not None and not self._creating.done():
            return
        agent = self.broker.cluster
        cfg = self.broker.config
        live = len(agent.image.live_brokers())
        replication = max(1, min(int(cfg.get("offsets.topic.replication.factor")), live))
        self._creating = asyncio.get_running_loop().create_task(create_topic(
            agent, OFFSETS_TOPIC, int(cfg.get("offsets.topic.num.partitions")), replication,
            {"cleanup.policy": "compact",
             "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))}))

    def create_state_topic(self) -> None:
        """``__transaction_state`` through the controller (Kafka's settings; the replication
        factor capped by the live brokers; min.insync.replicas as configured, as Kafka
        writes it: acks=all never needs more than the replica count, replication/min_isr.py)."""
        if self._creating_state is not None and not self._creating_state.done():
            return
        agent = self.broker.cluster
        cfg = self.broker.config
        live = len(agent.image.live_brokers())
        replication = max(1, min(int(cfg.get("transaction.state.log.replication.factor")),
                                 live))
        self._creating_state = asyncio.get_running_loop().create_task(create_topic(
            agent, STATE_TOPIC, int(cfg.get("transaction.state.log.num.partitions")),
            replication,
            {"cleanup.policy": "compact", "min.insync.replicas":
             str(cfg.get("transaction.state.log.min.isr")),
             "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))}))

    def leadership_changed(self, partition: Partition) -> None:
        if partition.topic.name == STATE_TOPIC:
            transactions = self.broker.transactions
            if transactions is not None:
                transactions.leadership_changed(partition)
            return
        if partition.topic.name == OFFSETS_TOPIC and not self._reload_scheduled:
            self._reload_scheduled = True
            asyncio.get_running_loop().call_soon(self._reload_groups)

    def _reload_groups(self) -> None:
        self._reload_scheduled = False
        broker: Any = self.broker
        if not broker.opened:
            return
        old = broker.groups
        if old is not None:
            old.close()  # parked requests answer NOT_COORDINATOR: clients find it again
        broker.groups = broker._make_group_coordinator()
        broker.groups.load()
        log.info("group coordinator rebuilt after an offsets leadership change")
