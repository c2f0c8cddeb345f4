"""The controller's APIs, served on the controller listener next to the Raft APIs.

BrokerRegistration, BrokerHeartbeat, AlterPartition and AllocateProducerIds
(``producer_ids.py``) come from brokers; CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders, IncrementalAlterConfigs (topics and brokers),
the reassignment APIs, CreateAcls, DeleteAcls and AlterUserScramCredentials come from
brokers forwarding what clients sent them (Kafka 4 brokers forward these to the active
controller too). A controller that is not active answers
NOT_CONTROLLER in every error slot, as Kafka's ControllerApis does, and the broker's
forwarder retries on the active one.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from sdk.errors import (
    ElectionNotNeededError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    NotLeaderOrFollowerError,
    PreferredLeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from sdk.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from sdk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from sdk.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from sdk.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from sdk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from sdk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from sdk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from sdk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from sdk.protocol.primitives import ZERO_UUID
from server_ref.config import BrokerConfig
from server_ref.controller.acl_records import register_security_apis
from server_ref.controller.config_records import broker_config_record
from server_ref.controller.controller import QuorumController
from server_ref.controller.election import assign_replicas, elect
from server_ref.controller.group_configs import group_config_record
from server_ref.controller.image import NO_LEADER, PartitionImage
from server_ref.controller.producer_ids import register_producer_id_apis
from server_ref.controller.reassign import complete_if_caught_up, register_reassignment_apis
from server_ref.controller.records import partition_record
from server_ref.tiered.settings import validate_topic
from server_ref.topics import INTERNAL_TOPICS, MAX_PARTITIONS, parse_topic_configs
from server_ref.topics import validate_topic_name as _validate_name

__all__ = ["register_controller_apis"]

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
PREFERRED, UNCLEAN = 0, 1


def _code(exc: BaseException) -> tuple[int, str | None]:
    if isinstance(exc, KafkaError):
        return getattr(exc, "errno", UnknownServerError.errno), exc.message
    return UnknownServerError.errno, str(exc)


def register_controller_apis(server: Any, controller: QuorumController,
                             config: BrokerConfig) -> None:
    apis = ControllerApis(controller, config)
    server.register(62, 0, 4, apis.broker_registration)
    server.register(63, 0, 1, apis.broker_heartbeat)
    server.register(56, 2, 3, apis.alter_partition)
    server.register(19, 2, 7, apis.create_topics)
    server.register(20, 1, 6, apis.delete_topics)
    server.register(37, 0, 3, apis.create_partitions)
    server.register(43, 0, 2, apis.elect_leaders)
    server.register(44, 0, 1, apis.incremental_alter_configs)
    register_reassignment_apis(server, controller)
    register_security_apis(server, controller)
    register_producer_id_apis(server, controller)


class ControllerApis:
    def __init__(self, controller: QuorumController, config: BrokerConfig) -> None:
        self.c = controller
        self.config = config

    # ------------------------------------------------------------------ brokers

    async def broker_registration(self, req: BrokerRegistrationRequest, version: int
                                  ) -> BrokerRegistrationResponse:
        # The broker lists its inter-broker listener first (the one other brokers use).
        listener = req.listeners[0] if req.listeners else None
        if listener is None:
            return BrokerRegistrationResponse(error_code=InvalidRequestError.errno)
        try:
            epoch = await self.c.register(req.broker_id, req.cluster_id,
                                          str(req.incarnation_id), listener.host,
                                          listener.port, req.rack,
                                          {x.name: [x.host, x.port] for x in req.listeners})
        except Exception as exc:
            return BrokerRegistrationResponse(error_code=_code(exc)[0])
        return BrokerRegistrationResponse(broker_epoch=epoch)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest, version: int
                               ) -> BrokerHeartbeatResponse:
        try:
            caught_up, fenced, shut_down = await self.c.heartbeat(
                req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
                req.want_shut_down)
        except Exception as exc:
            return BrokerHeartbeatResponse(error_code=_code(exc)[0], is_fenced=True)
        return BrokerHeartbeatResponse(is_caught_up=caught_up, is_fenced=fenced,
                                       should_shut_down=shut_down)

    async def alter_partition(self, req: AlterPartitionRequest, version: int
                              ) -> AlterPartitionResponse:
        """A leader's ISR change: accepted only from the current leader at the current
        leader and partition epochs, with every new member an unfenced replica."""
        image = self.c.image
        results: dict[tuple[str, int], AlterPartitionResponse.PartitionData] = {}

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            for t in req.topics:
                name = image.topic_ids.get(str(t.topic_id))
                for pd in t.partitions:
                    out = AlterPartitionResponse.PartitionData(partition_index=pd.partition_index)
                    results[(str(t.topic_id), pd.partition_index)] = out
                    p = image.partition(name, pd.partition_index) if name else None
                    isr = list(pd.new_isr) or [s.broker_id for s in pd.new_isr_with_epochs]
                    if p is None:
                        out.error_code = UnknownTopicOrPartitionError.errno
                    elif p.leader != req.broker_id:
                        out.error_code = NotLeaderOrFollowerError.errno
                    elif pd.leader_epoch != p.leader_epoch:
                        out.error_code = FencedLeaderEpochError.errno
                    elif pd.partition_epoch != p.partition_epoch:
                        out.error_code = InvalidUpdateVersionError.errno
                    elif any(b not in p.replicas or (b not in p.isr and not self.c.alive(b))
                             for b in isr) or req.broker_id not in isr:
                        out.error_code = IneligibleReplicaError.errno
                    else:
                        new = p.copy()
                        new.isr = [r for r in p.replicas if r in isr]
                        new.partition_epoch += 1
                        # The last adding replica in sync finishes a reassignment.
                        new = complete_if_caught_up(new, self.c.alive) or new
                        assert name is not None
                        batch.append(partition_record(str(t.topic_id), pd.partition_index, new))
                        p = new
                    if p is not None:
                        out.leader_id, out.leader_epoch = p.leader, p.leader_epoch
                        out.isr, out.partition_epoch = list(p.isr), p.partition_epoch
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            return AlterPartitionResponse(error_code=_code(exc)[0])
        # Committed: answer with the state as applied.
        topics: dict[str, AlterPartitionResponse.TopicData] = {}
        for (topic_id, index), out in results.items():
            name = image.topic_ids.get(topic_id)
            p = self.c.image.partition(name, index) if name else None
            if out.error_code == 0 and p is not None:
                out.isr, out.partition_epoch = list(p.isr), p.partition_epoch
            entry = topics.setdefault(topic_id, AlterPartitionResponse.TopicData(
                topic_id=_uuid(topic_id)))
            entry.partitions.append(out)
        return AlterPartitionResponse(topics=list(topics.values()))

    # ------------------------------------------------------------------ topics

    def _topic_default(self, key: str) -> Any:
        return self.config.topic_default(key)

    async def create_topics(self, req: CreateTopicsRequest, version: int
                            ) -> CreateTopicsResponse:
        counts = Counter(t.name for t in req.topics)
        results = {t.name: CreateTopicsResponse.CreatableTopicResult(name=t.name)
                   for t in req.topics}
        image = self.c.image

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch: list[dict[str, Any]] = []
            live = [b.node_id for b in image.live_brokers()]
            for t in req.topics:
                result = results[t.name]
                try:
                    if counts[t.name] > 1:
                        raise InvalidRequestError("Create topics request from client contains "
                                                  "multiple topics with the same name")
                    _validate_name(t.name)
                    if t.name in image.topics:
                        raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
                    configs = {c.name: c.value for c in t.configs}
                    overrides = parse_topic_configs(configs)
                    validate_topic({}, overrides, self.config)  # tiered storage's rules
                    assignment = self._assignment(t, live)
                    rf = len(assignment[0])
                    result.num_partitions, result.replication_factor = len(assignment), rf
                    if req.validate_only:
                        continue
                    topic_id = self.c.new_topic_id()
                    result.topic_id = _uuid(topic_id)
                    batch.append({"type": "topic", "name": t.name, "id": topic_id,
                                  "configs": {k: v for k, v in configs.items()
                                              if v is not None and k in overrides}})
                    for index, replicas in enumerate(assignment):
                        batch.append(partition_record(topic_id, index, _new_partition(replicas)))
                except KafkaError as exc:
                    result.error_code, result.error_message = _code(exc)
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _code(exc)
            for result in results.values():
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
        return CreateTopicsResponse(topics=list(results.values()))

    def _assignment(self, t: CreateTopicsRequest.CreatableTopic, live: list[int]
                    ) -> list[list[int]]:
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were "
                    "set. Both cannot be used at the same time.")
            ordered = sorted(t.assignments, key=lambda a: a.partition_index)
            if [a.partition_index for a in ordered] != list(range(len(ordered))):
                raise InvalidReplicaAssignmentError(
                    "partitions should be a consecutive 0-based integer sequence")
            out = [list(a.broker_ids) for a in ordered]
            for replicas in out:
                _check_replicas(replicas, self.c.image.brokers)
            return out
        partitions = t.num_partitions if t.num_partitions != -1 else int(
            self.config.get("num.partitions"))
        rf = t.replication_factor if t.replication_factor != -1 else int(
            self.config.get("default.replication.factor"))
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")
        if rf < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if rf > len(live):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {rf} time(s): The target replication "
                f"factor of {rf} cannot be reached because only {len(live)} broker(s) are "
                "registered.")
        return assign_replicas(live, partitions, rf, self.c.next_start())

    async def delete_topics(self, req: DeleteTopicsRequest, version: int
                            ) -> DeleteTopicsResponse:
        wanted = ([(t.name, t.topic_id) for t in req.topics] if version >= 6
                  else [(n, ZERO_UUID) for n in req.topic_names])
        image = self.c.image
        results = [DeleteTopicsResponse.DeletableTopicResult(name=n, topic_id=i)
                   for n, i in wanted]

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            for result in results:
                name = result.name
                if name is None:
                    name = image.topic_ids.get(str(result.topic_id))
                    if name is None:
                        result.error_code = UnknownTopicIdError.errno
                        continue
                topic = image.topics.get(name)
                if topic is None:
                    result.error_code = UnknownTopicOrPartitionError.errno
                    result.error_message = "This server does not host this topic-partition."
                    continue
                if name in INTERNAL_TOPICS:
                    result.error_code = InvalidTopicError.errno
                    continue
                result.name, result.topic_id = name, _uuid(topic.topic_id)
                batch.append({"type": "remove_topic", "id": topic.topic_id})
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _code(exc)
            for result in results:
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
        return DeleteTopicsResponse(responses=results)

    async def create_partitions(self, req: CreatePartitionsRequest, version: int
                                ) -> CreatePartitionsResponse:
        image = self.c.image
        counts = Counter(t.name for t in req.topics)
        results = [CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name)
                   for t in req.topics]

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            live = [b.node_id for b in image.live_brokers()]
            for t, result in zip(req.topics, results, strict=True):
                try:
                    if counts[t.name] > 1:
                        raise InvalidRequestError(f"topic {t.name} appears more than once")
                    topic = image.topics.get(t.name)
                    if topic is None:
                        raise UnknownTopicOrPartitionError(
                            f"The topic '{t.name}' does not exist.")
                    current = len(topic.partitions)
                    if t.count <= current:
                        raise InvalidPartitionsError(
                            f"Topic currently has {current} partitions, {t.count} is not "
                            f"greater than {current}." if t.count < current else
                            f"Topic already has {current} partitions.")
                    rf = len(topic.partitions[0].replicas)
                    if t.assignments is not None:
                        if len(t.assignments) != t.count - current:
                            raise InvalidReplicaAssignmentError(
                                f"Increasing the number of partitions by {t.count - current} "
                                f"but {len(t.assignments)} assignments provided.")
                        added = [list(a.broker_ids) for a in t.assignments]
                        for replicas in added:
                            _check_replicas(replicas, image.brokers)
                    else:
                        if rf > len(live):
                            raise InvalidReplicationFactorError(
                                f"Unable to replicate the partition {rf} time(s): only "
                                f"{len(live)} broker(s) are registered.")
                        added = assign_replicas(live, t.count - current, rf,
                                                self.c.next_start(), current)
                    if req.validate_only:
                        continue
                    for offset, replicas in enumerate(added):
                        batch.append(partition_record(topic.topic_id, current + offset,
                                                      _new_partition(replicas)))
                except KafkaError as exc:
                    result.error_code, result.error_message = _code(exc)
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _code(exc)
            for result in results:
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
        return CreatePartitionsResponse(results=results)

    async def elect_leaders(self, req: ElectLeadersRequest, version: int
                            ) -> ElectLeadersResponse:
        image = self.c.image
        wanted: list[tuple[str, int]] = []
        if req.topic_partitions is None:  # every partition
            wanted = [(t.name, i) for t in image.topics.values() for i in t.partitions]
        else:
            wanted = [(t.topic, i) for t in req.topic_partitions for i in t.partitions]
        outcome: dict[tuple[str, int], tuple[int, str | None]] = {}

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            for name, index in wanted:
                p = image.partition(name, index)
                if p is None:
                    outcome[(name, index)] = (UnknownTopicOrPartitionError.errno, None)
                    continue
                if req.election_type == PREFERRED:
                    preferred = p.replicas[0]
                    if p.leader == preferred:
                        outcome[(name, index)] = (ElectionNotNeededError.errno, None)
                    elif preferred in p.isr and self.c.alive(preferred):
                        batch.append(self.c.partition_change(name, index,
                                                             self.c.reelect(p, preferred)))
                        outcome[(name, index)] = (0, None)
                    else:
                        outcome[(name, index)] = (
                            PreferredLeaderNotAvailableError.errno,
                            f"Failed to elect leader for partition {name}-{index} under "
                            "strategy PreferredReplicaPartitionLeaderElectionStrategy")
                else:
                    if p.leader != NO_LEADER:
                        outcome[(name, index)] = (ElectionNotNeededError.errno, None)
                        continue
                    leader = elect(p, self.c.alive, True)
                    if leader == NO_LEADER:
                        outcome[(name, index)] = (PreferredLeaderNotAvailableError.errno,
                                                  "no live replica")
                        continue
                    new = self.c.reelect(p, leader)
                    new.isr = new.isr if leader in new.isr else [leader]
                    batch.append(self.c.partition_change(name, index, new))
                    outcome[(name, index)] = (0, None)
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            return ElectLeadersResponse(error_code=_code(exc)[0])
        by_topic: dict[str, ElectLeadersResponse.ReplicaElectionResult] = {}
        for (name, index), (code, message) in outcome.items():
            if req.topic_partitions is None and code == ElectionNotNeededError.errno:
                continue  # asked for every partition: Kafka lists only those it elected
            entry = by_topic.setdefault(name, ElectLeadersResponse.ReplicaElectionResult(
                topic=name))
            entry.partition_result.append(ElectLeadersResponse.PartitionResult(
                partition_id=index, error_code=code, error_message=message))
        return ElectLeadersResponse(replica_election_results=list(by_topic.values()))

    async def incremental_alter_configs(self, req: IncrementalAlterConfigsRequest,
                                        version: int) -> IncrementalAlterConfigsResponse:
        """Topic configs (SET 0, DELETE 1), dynamic broker configs (``config_records.py``)
        and group configs (``group_configs.py``)."""
        image = self.c.image
        results = [IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name)
            for r in req.resources]

        def decide() -> tuple[list[dict[str, Any]], None]:
            batch = []
            for r, result in zip(req.resources, results, strict=True):
                try:
                    if r.resource_type == BROKER_RESOURCE:  # dynamic broker configs
                        record = broker_config_record(image, self.config, r.resource_name,
                                                      r.configs)
                        if not req.validate_only:
                            batch.append(record)
                        continue
                    if r.resource_type == GROUP_RESOURCE:  # group_configs.py
                        record = group_config_record(image, self.config, r.resource_name,
                                                     r.configs)
                        if not req.validate_only:
                            batch.append(record)
                        continue
                    if r.resource_type != TOPIC_RESOURCE:
                        raise InvalidRequestError(
                            f"Unsupported resource type {r.resource_type}")
                    topic = image.topics.get(r.resource_name)
                    if topic is None:
                        raise UnknownTopicOrPartitionError(
                            f"topic {r.resource_name} does not exist")
                    configs = dict(topic.configs)
                    for c in r.configs:
                        if c.config_operation == 0 and c.value is not None:
                            configs[c.name] = c.value
                        elif c.config_operation == 1:
                            configs.pop(c.name, None)
                        else:
                            raise InvalidRequestError(
                                f"operation {c.config_operation} is not supported for topics")
                    # tiered storage's rules see the change (turning it off needs
                    # remote.log.delete.on.disable, ...)
                    validate_topic(parse_topic_configs(topic.configs),
                                   parse_topic_configs(configs), self.config)
                    if not req.validate_only:
                        batch.append({"type": "topic_configs", "topic_id": topic.topic_id,
                                      "configs": configs})
                except KafkaError as exc:
                    result.error_code, result.error_message = _code(exc)
            return batch, None

        try:
            await self.c.write(decide)
        except Exception as exc:
            code, message = _code(exc)
            for result in results:
                if result.error_code == 0:
                    result.error_code, result.error_message = code, message
        return IncrementalAlterConfigsResponse(responses=results)


def _new_partition(replicas: list[int]) -> PartitionImage:
    return PartitionImage(list(replicas), list(replicas), replicas[0])


def _check_replicas(replicas: list[int], brokers: dict[int, Any]) -> None:
    if not replicas:
        raise InvalidReplicaAssignmentError("a replica assignment may not be empty")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(f"duplicate brokers in assignment {replicas}")
    unknown = [b for b in replicas if b not in brokers]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"the assignment {replicas} names unregistered brokers {unknown}")


def _uuid(text: str) -> uuid.UUID:
    return uuid.UUID(text)
