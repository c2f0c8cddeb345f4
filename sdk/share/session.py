"""A share session with one broker (KIP-932): its epoch and the partitions it holds. Pure.

The first ShareFetch opens the session with epoch 0 and names every partition; later
requests carry the next epoch (1, 2, ... wrapping to 1 after 2^31-1) and only what changed:
new partitions, partitions with acknowledgements, and partitions to forget. Epoch -1 closes
it. A session that opens cannot carry acknowledgements (the broker refuses them at epoch 0),
so pending acknowledgements of a session lost to SHARE_SESSION_NOT_FOUND or
INVALID_SHARE_SESSION_EPOCH fail, and the broker redelivers those records after their
acquisition locks time out.
"""

from __future__ import annotations

from sdk.types import TopicPartition

__all__ = ["CLOSE_EPOCH", "ShareSession"]

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = (1 << 31) - 1


class ShareSession:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.epoch = OPEN_EPOCH
        self.partitions: set[TopicPartition] = set()  # what the broker holds for us

    @property
    def is_open(self) -> bool:
        return self.epoch > OPEN_EPOCH

    def plan(self, wanted: set[TopicPartition]
             ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(partitions to name, partitions to forget) for the next fetch towards ``wanted``.

        At epoch 0 every wanted partition is named and none forgotten (a new session)."""
        if not self.is_open:
            return sorted(wanted), []
        return sorted(wanted - self.partitions), sorted(self.partitions - wanted)

    def sent(self, named: list[TopicPartition], forgotten: list[TopicPartition]) -> None:
        """The broker answered a request that named/forgot these: move the epoch on."""
        if not self.is_open:
            self.partitions = set(named)
        else:
            self.partitions.update(named)
            self.partitions.difference_update(forgotten)
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def reset(self) -> None:
        """The broker lost or refused the session: the next request opens a new one."""
        self.epoch = OPEN_EPOCH
        self.partitions = set()
