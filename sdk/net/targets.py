"""Where a request goes: a node id, any node, the controller, a coordinator or a partition's
leader (``NetClient.send`` resolves these; re-exported by ``sdk.net.client``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ANY_NODE", "CONTROLLER", "Coordinator", "CoordinatorType", "LeaderOf", "NodeRole",
           "Target"]


class NodeRole(enum.Enum):
    ANY = "any"  # the least loaded reachable node
    CONTROLLER = "controller"


ANY_NODE = NodeRole.ANY
CONTROLLER = NodeRole.CONTROLLER


class CoordinatorType(enum.IntEnum):
    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class Coordinator:
    """Route to the coordinator of a consumer group (or transactional id)."""

    key: str
    key_type: CoordinatorType = CoordinatorType.GROUP


@dataclass(frozen=True, slots=True)
class LeaderOf:
    """Route to the current leader of a partition."""

    topic: str
    partition: int


Target = int | NodeRole | Coordinator | LeaderOf
