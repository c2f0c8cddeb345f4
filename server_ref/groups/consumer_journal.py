"""KIP-848 groups in ``__consumer_offsets``: one record per group, rewritten on change.

The key is Kafka's ConsumerGroupMetadataKey layout (version 3, the group id), so the
record sorts and compacts with the others as Kafka's would. The value is ours, not Kafka's
(Kafka spreads a group over metadata, member, target-assignment and current-assignment
records, each a flexible-version struct): a version (int16, 0) and the group's state as
JSON — epochs, members with their subscriptions, epochs and partitions, the target
assignment. A tombstone removes the group. Committed offsets stay in the offset records.
"""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

from sdk.errors import MalformedDataError
from sdk.protocol.primitives import read_string, write_string
from server_ref.groups.assignors import Assignment
from server_ref.groups.consumer_group import (
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)

CONSUMER_GROUP_KEY_VERSION = 3  # Kafka's ConsumerGroupMetadataKey
_VALUE_VERSION = 0
_INT16 = struct.Struct(">h")


def consumer_group_key(group_id: str) -> bytes:
    w = bytearray(_INT16.pack(CONSUMER_GROUP_KEY_VERSION))
    write_string(w, group_id)
    return bytes(w)


def decode_consumer_group_key(key: bytes) -> str | None:
    """The group id of a consumer-group record key, None for other record types."""
    if len(key) < 2 or _INT16.unpack_from(key, 0)[0] != CONSUMER_GROUP_KEY_VERSION:
        return None
    group_id, _pos = read_string(key, 2)
    return group_id


def _parts(a: Assignment) -> dict[str, list[int]]:
    return {str(t): sorted(ps) for t, ps in a.items()}


def _unparts(raw: dict[str, list[int]]) -> Assignment:
    return {uuid.UUID(t): set(ps) for t, ps in raw.items()}


def encode_group(group: ConsumerGroup) -> bytes:
    state: dict[str, Any] = {
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor,
        "target": {m: _parts(a) for m, a in group.target.items()},
        # what the target was computed from, so a restart does not count it as a change
        "topics": {name: [str(tid), count]
                   for name, (tid, count) in group.subscription_metadata.items()},
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor,
            "topics": list(m.subscribed_topic_names), "regex": m.subscribed_topic_regex,
            "epoch": m.member_epoch, "previous_epoch": m.previous_member_epoch,
            "state": m.state.value, "assigned": _parts(m.assigned),
            "revoking": _parts(m.pending_revocation),
            "classic": None if m.classic is None else {
                "session_timeout_ms": m.classic.session_timeout_ms,
                "protocols": [[name, meta.hex()] for name, meta in m.classic.protocols]},
        } for m in group.members.values()],
    }
    return _INT16.pack(_VALUE_VERSION) + json.dumps(state, sort_keys=True).encode()


def decode_group(group_id: str, value: bytes) -> ConsumerGroup:
    try:
        (version,) = _INT16.unpack_from(value, 0)
        if version != _VALUE_VERSION:
            raise MalformedDataError(f"consumer group value version {version} is not supported")
        state = json.loads(bytes(value[2:]).decode())
        group = ConsumerGroup(group_id, group_epoch=state["group_epoch"],
                              assignment_epoch=state["assignment_epoch"],
                              assignor=state["assignor"])
        group.target = {m: _unparts(a) for m, a in state["target"].items()}
        group.subscription_metadata = {name: (uuid.UUID(tid), count)
                                       for name, (tid, count) in state["topics"].items()}
        for raw in state["members"]:
            member = ConsumerMember(
                raw["member_id"], raw["instance_id"], raw["rack_id"], raw["client_id"],
                raw["client_host"], raw["rebalance_timeout_ms"], raw["server_assignor"],
                tuple(raw["topics"]), raw["regex"], raw["epoch"], raw["previous_epoch"],
                MemberState(raw["state"]), _unparts(raw["assigned"]),
                _unparts(raw["revoking"]))
            classic = raw.get("classic")
            if classic is not None:
                member.classic = ClassicInfo(classic["session_timeout_ms"], tuple(
                    (name, bytes.fromhex(meta)) for name, meta in classic["protocols"]))
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            group.add_ownership(member)
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise MalformedDataError(f"bad consumer group record of {group_id}: {exc}") from None
    return group
