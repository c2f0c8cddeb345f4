"""Partition assignors of the classic consumer group protocol, by Kafka's protocol names."""

from __future__ import annotations

from sdk.consumer.assignors.base import (
    Assignor,
    MemberAssignment,
    MemberSubscription,
    RebalanceProtocol,
)
from sdk.consumer.assignors.range import RangeAssignor
from sdk.consumer.assignors.roundrobin import RoundRobinAssignor
from sdk.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from sdk.errors import ConfigError

ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}

# Java's class names, so `partition.assignment.strategy` from a properties file works as is.
JAVA_CLASS_NAMES: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def common_protocol(assignors: list[Assignor]) -> RebalanceProtocol:
    """The rebalance protocol a member uses: the best one *all* its assignors support.

    As in Java, listing an eager-only assignor (e.g. "range") beside "cooperative-sticky"
    keeps the member eager, which is what allows a rolling upgrade between the two.
    """
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        raise ConfigError(
            "the assignors share no rebalance protocol",
            key="partition.assignment.strategy",
            value=[a.name for a in assignors],
            allowed="assignors that all support eager, or all support cooperative",
        )
    if RebalanceProtocol.COOPERATIVE in common:
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER


__all__ = [
    "ASSIGNORS",
    "JAVA_CLASS_NAMES",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "common_protocol",
]
