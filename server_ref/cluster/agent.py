"""A broker's part in a cluster: metadata replay, registration, heartbeats, forwarding.

The broker runs a Raft *observer* of ``__cluster_metadata`` and applies every committed
record to its ``MetadataImage``; after each change ``_reconcile`` makes the local state
match: topics created or deleted (their logs), partitions added, config overrides, and each
partition's role handed to the ``ReplicaManager``. It registers with the active controller
(BrokerRegistration: fenced until its metadata has caught up with its registration) and
heartbeats every ``broker.heartbeat.interval.ms``; a stale epoch makes it register again.
Admin requests clients send to a broker are forwarded to the active controller
(``controller_request``, retried on NOT_CONTROLLER), as Kafka 4 brokers forward them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    BrokerIdNotRegisteredError,
    NotControllerError,
    RequestTimedOutError,
    StaleBrokerEpochError,
)
from sdk.protocol.message import Message
from sdk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from sdk.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from server_ref.cluster.coordinators import CoordinatorPlacement
from server_ref.cluster.peer import PeerConnection
from server_ref.cluster.producer_ids import ControllerProducerIds
from server_ref.controller import records
from server_ref.controller.image import MetadataImage
from server_ref.raft.api import CommittedBatch, LeaderAndEpoch, RaftConfig
from server_ref.replication.lease import LeadershipLease
from server_ref.replication.manager import ReplicaManager
from server_ref.share.coordinator import ShareCoordinator

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.topics import Partition

log = logging.getLogger(__name__)

__all__ = ["ClusterAgent"]

NOT_CONTROLLER = NotControllerError.errno
STALE_OR_UNKNOWN = (StaleBrokerEpochError.errno, BrokerIdNotRegisteredError.errno)
CONTROLLER_RETRY_S = 0.05
ATTEMPT_S = 2.0  # one controller's answer; then the next voter is tried
_ITEM_LISTS = ("topics", "responses", "results", "replica_election_results", "partitions",
               "partition_result", "filter_results")


# Kafka's SecurityProtocol ids, as BrokerRegistration carries them.
PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def inter_broker_listener(cfg: Any) -> tuple[str, dict[str, str]]:
    """(the inter-broker listener's name, {listener: security protocol}), and how this
    process's connections to other brokers authenticate on it (``peer_security.py``).

    The inter-broker listener is Kafka's ``inter.broker.listener.name``, else the listener
    whose protocol is ``security.inter.broker.protocol`` (PLAINTEXT by default); the
    controllers are reached on their PLAINTEXT listener. A listener that does not exist, or
    a secured one without the settings to log in, is refused at start."""
    from sdk.errors import ConfigError
    from server_ref.cluster.peer import use_inter_broker_security
    from server_ref.cluster.peer_security import peer_security
    from server_ref.security.listeners import resolve_listeners

    settings = cfg.security
    listeners = resolve_listeners(settings, cfg.host, cfg.port, cfg.advertised_host)
    protocols = {lst.name: lst.protocol for lst in listeners}
    named = settings.get("inter.broker.listener.name")
    if named is not None:
        name = named.strip().upper()
    else:
        wanted = settings.get("security.inter.broker.protocol", "PLAINTEXT").strip().upper()
        name = next((n for n, proto in protocols.items() if proto == wanted), "")
    if name not in protocols:
        raise ConfigError(
            "cluster mode: no listener for brokers to reach each other on; name one with "
            "inter.broker.listener.name (e.g. listeners=PLAINTEXT://127.0.0.1:0,"
            "SASL_SSL://127.0.0.1:0 with inter.broker.listener.name=PLAINTEXT)",
            key="inter.broker.listener.name", value=named)
    use_inter_broker_security(peer_security(settings, name, protocols[name]))
    return name, protocols


def _not_controller(message: Any, depth: int = 0) -> bool:
    """Whether a controller's answer says NOT_CONTROLLER anywhere (top level or items)."""
    if getattr(message, "error_code", 0) == NOT_CONTROLLER:
        return True
    if depth >= 2:
        return False
    for name in _ITEM_LISTS:
        for item in getattr(message, name, None) or ():
            if _not_controller(item, depth + 1):
                return True
    return False


class ClusterAgent:
    def __init__(self, broker: Broker, voters: dict[int, tuple[str, int]],
                 raft_config: RaftConfig) -> None:
        from server_ref.raft.node import RaftNode  # the node module is heavier: load here

        self.broker = broker
        self.node_id = broker.node_id
        cfg = broker.config
        self.heartbeat_s = int(cfg.get("broker.heartbeat.interval.ms")) / 1000
        self.raft = RaftNode(self.node_id, voters, Path(broker.data_dir) / "__cluster_metadata",
                             raft_config, is_voter=False)
        self.image = MetadataImage()
        self.replicas = ReplicaManager(self, self.node_id,
                                       lag_time_ms=int(cfg.get("replica.lag.time.max.ms")),
                                       fetch_wait_ms=int(cfg.get("replica.fetch.wait.max.ms")))
        self.placement = CoordinatorPlacement(broker)
        # Leaderships count only while the controller's heartbeat answers hold.
        self.lease = LeadershipLease(self, int(cfg.get("broker.session.timeout.ms")) / 1000)
        self.broker_epoch = -1
        self.fenced = True
        self.incarnation = uuid.uuid4()
        self.voters = dict(voters)
        # Which listener other brokers reach this one on (replica fetches, internal
        # writes), and every listener's security protocol, for the registration.
        self.inter_broker_listener, self.listener_protocols = inter_broker_listener(cfg)
        self._replayed: tuple[int, int, int] | None = None  # (image, security, configs)
        self._peers: dict[int, PeerConnection] = {}  # controller id -> connection
        self._target: int | None = None  # the controller that answered last
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._reconcile_scheduled = False
        self._changed = asyncio.Event()
        self._stopping = False
        self.raft.register_listener(self._on_commit, self._on_snapshot, self._on_leader_change)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        # Producer ids must be unique in the cluster: blocks from the active controller
        # (AllocateProducerIds), as Kafka's brokers get them.
        producer_ids = ControllerProducerIds(self)
        self.broker.producer_ids = producer_ids
        if self.broker.authorizer is not None:  # no decision before the ACLs are replayed
            self.broker.authorizer.ready = False
        await self.raft.start()
        self.replicas.start()
        producer_ids.start()
        self._reconcile()
        self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeats())

    async def stop(self) -> None:
        self._stopping = True
        if self.broker_epoch >= 0:
            try:  # a controlled shutdown: the controller moves leaderships away first
                await asyncio.wait_for(self._heartbeat_once(shut_down=True), 2.0)
            except Exception as exc:
                log.info("controlled shutdown not acknowledged: %s", exc)
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            self._heartbeat_task = None
        await self.replicas.close()
        for peer in self._peers.values():
            await peer.close()
        await self.raft.close()

    # ------------------------------------------------------------------ metadata replay

    def _on_commit(self, batch: CommittedBatch) -> None:
        for value in batch.records:
            try:
                self.image.apply(records.decode(value))
            except (ValueError, KeyError) as exc:
                log.error("metadata record at %d skipped: %s", batch.last_offset, exc)
        self.image.offset = batch.last_offset
        self._schedule_reconcile()

    def _on_snapshot(self, payload: bytes, offset: int) -> None:
        self.image = MetadataImage.from_snapshot(payload, offset)
        self._schedule_reconcile()

    def _on_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.leader_id is not None:
            self._target = leader.leader_id

    def _schedule_reconcile(self) -> None:
        if not self._reconcile_scheduled:
            self._reconcile_scheduled = True
            asyncio.get_running_loop().call_soon(self._reconcile)

    def reconcile_now(self) -> None:
        """Apply what the image holds now, not at the next loop turn."""
        self._reconcile()

    def _reconcile(self) -> None:
        self._reconcile_scheduled = False
        if not self.broker.opened:
            return
        topics = self.broker.topics
        image = self.image
        for local in list(topics):
            wanted = image.topics.get(local.name)
            # Only what the log says is gone: a restarted broker's image is empty until its
            # observer has replayed the log, and its logs must survive that.
            if (wanted is None and str(local.topic_id) in image.removed_topic_ids) or (
                    wanted is not None and str(local.topic_id) != wanted.topic_id):
                for partition in local.partitions:
                    self.replicas.forget(partition)
                self.broker.delete_topic(local.name)
        for t in image.topics.values():
            try:
                topic = topics.ensure(t.name, uuid.UUID(t.topic_id), len(t.partitions),
                                      t.configs)
            except Exception:
                log.exception("cannot create the local logs of %s", t.name)
                continue
            for index, p in t.partitions.items():
                if index < len(topic.partitions):
                    self.replicas.apply(topic.partitions[index], p)
        self._replay_security_and_configs()
        self._changed.set()
        self._changed = asyncio.Event()

    def replayed(self, security_after: int = -1, configs_after: int = -1) -> bool:
        """Whether this broker's stores hold the image's ACLs, credentials and broker
        configs, and those moved past the given versions (a forwarded change is seen)."""
        image = self.image
        return (self._replayed == (id(image), image.security_version, image.configs_version)
                and image.security_version > security_after
                and image.configs_version > configs_after)

    def _replay_security_and_configs(self) -> None:
        """ACLs, SCRAM credentials, dynamic broker configs and group configs as the image
        holds them, loaded into this broker's stores when they changed."""
        from server_ref.controller.acl_records import load_acls, load_credentials
        from server_ref.controller.config_records import apply_broker_configs
        from server_ref.controller.group_configs import apply_group_configs

        image = self.image
        key = (id(image), image.security_version, image.configs_version)
        if key == self._replayed:
            return
        if self._replayed is None or key[:2] != self._replayed[:2]:
            if load_acls(image, self.broker.acls):
                self.broker.fetch_sessions.clear()  # re-authorized, as on an ACL change
            load_credentials(image, self.broker.credentials)
        if self._replayed is None or key[::2] != self._replayed[::2]:
            apply_broker_configs(image, self.broker)
            apply_group_configs(image, self.broker)
        self._replayed = key

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        """Wait until ``predicate(image)`` holds (after a forwarded change)."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.image):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return False
        return True

    # ------------------------------------------------------------------ for the others

    def endpoint_of(self, broker: int, listener: str | None = None
                    ) -> tuple[str, int] | None:
        """Where ``broker`` listens: on the inter-broker listener (None) or, for a client
        that came in on ``listener``, on that one (None if it has no such listener)."""
        found = self.image.brokers.get(broker)
        return None if found is None else found.endpoint(listener)

    def became_leader(self, partition: Partition) -> None:
        self.placement.leadership_changed(partition)
        ShareCoordinator.leadership_changed(self.broker, partition)

    def resigned(self, partition: Partition) -> None:
        self.placement.leadership_changed(partition)
        ShareCoordinator.leadership_changed(self.broker, partition)

    @property
    def controller_id(self) -> int:
        leader = self.raft.leader().leader_id
        return -1 if leader is None else leader

    async def controller_request(self, message: Message, version: int,
                                 timeout_s: float = 10.0) -> Message:
        """Send to the active controller, retrying while there is none or it moved.

        The target is the last controller that answered, else the Raft leader this
        broker's observer knows; after a failure or NOT_CONTROLLER the next voter is
        tried, so a broker whose observer has not yet heard of a new leader (a paused or
        killed one) still reaches it before its session runs out."""
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        voters = sorted(self.voters)
        target = self._target if self._target is not None else self.raft.leader().leader_id
        while time.monotonic() < deadline:
            if target not in self.voters:
                target = voters[0]
            peer = self._peers.get(target)
            if peer is None:
                host, port = self.voters[target]
                peer = self._peers[target] = PeerConnection(host, port, f"broker-{self.node_id}",
                                                            to_broker=False)
            remaining = deadline - time.monotonic()
            try:
                response = await peer.request(message, version,
                                              max(0.1, min(remaining, ATTEMPT_S)))
                if not _not_controller(response):
                    self._target = target
                    return response
                last = NotControllerError(f"controller {target} is not active")
            except (ConnectionError, OSError, TimeoutError) as exc:
                last = exc
            self._target = None
            leader = self.raft.leader().leader_id
            target = leader if leader is not None and leader != target else \
                voters[(voters.index(target) + 1) % len(voters)]
            await asyncio.sleep(CONTROLLER_RETRY_S)
        raise RequestTimedOutError(f"no active controller answered in {timeout_s} s: {last}")

    # ------------------------------------------------------------------ heartbeats

    async def _heartbeats(self) -> None:
        while not self._stopping:
            try:
                await self._heartbeat_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("heartbeat failed: %s", exc)
            await asyncio.sleep(self.heartbeat_s if not self.fenced else
                                min(self.heartbeat_s, 0.1))

    async def _heartbeat_once(self, shut_down: bool = False) -> None:
        if self.broker_epoch < 0:
            await self._register()
            return
        request = BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.image.offset, want_fence=False,
            want_shut_down=shut_down)
        sent = time.monotonic()
        response = await self.controller_request(request, 1, timeout_s=self.heartbeat_s * 2)
        assert isinstance(response, BrokerHeartbeatResponse)
        if response.error_code in STALE_OR_UNKNOWN:
            self.broker_epoch = -1
            return
        if response.error_code == 0:
            self.fenced = response.is_fenced
            self.lease.answered(sent, response.is_fenced)
            if not self.fenced and self.broker.authorizer is not None:
                self.broker.authorizer.ready = True  # caught up past its registration

    async def _register(self) -> None:
        endpoints = dict(self.broker.endpoints) or {
            self.inter_broker_listener: (self.broker.host, self.broker.port)}
        names = sorted(endpoints, key=lambda n: n != self.inter_broker_listener)
        request = BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.broker.cluster_id,
            incarnation_id=self.incarnation,
            listeners=[BrokerRegistrationRequest.Listener(
                name=name, host=endpoints[name][0], port=endpoints[name][1],
                security_protocol=PROTOCOL_IDS[self.listener_protocols.get(name, "PLAINTEXT")])
                for name in names],
            rack=None)
        response = await self.controller_request(request, 0, timeout_s=self.heartbeat_s * 2)
        assert isinstance(response, BrokerRegistrationResponse)
        if response.error_code == 0:
            self.broker_epoch = response.broker_epoch
            self.fenced = True
            log.info("broker %d registered with epoch %d", self.node_id, self.broker_epoch)
        else:
            log.warning("registration refused with error %d", response.error_code)
