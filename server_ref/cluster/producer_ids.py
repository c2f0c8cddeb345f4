"""Producer ids in cluster mode: blocks from the active controller (AllocateProducerIds).

InitProducerId (idempotent producers, and the transaction coordinator for new or exhausted
transactional ids) takes ids from the current block; the next block is asked for once 90%
of the current one is used (Kafka's RPCProducerIdManager), so a busy broker rarely waits.
With no id at hand the caller gets COORDINATOR_LOAD_IN_PROGRESS, which clients retry, and
a block is on its way. The controller commits each block to the metadata log before
answering, so ids are unique in the cluster across broker restarts, data directories lost,
and controller failovers; nothing is kept on the broker's disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from sdk.errors import CoordinatorLoadInProgressError, KafkaError
from sdk.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from server_ref.producer_state import ProducerIdAllocator

if TYPE_CHECKING:
    from server_ref.cluster.agent import ClusterAgent

log = logging.getLogger(__name__)

__all__ = ["ControllerProducerIds"]

PREFETCH_AT = 0.9  # of a block used: ask for the next one
RETRY_S = 0.1


class ControllerProducerIds(ProducerIdAllocator):
    """``ProducerIdAllocator``'s ``allocate`` over blocks the controller hands out."""

    def __init__(self, agent: ClusterAgent) -> None:  # no file: the metadata log keeps it
        self.agent = agent
        self._next = self._end = 0
        self._size = 0
        self._blocks: deque[tuple[int, int]] = deque()  # (start, length), fetched ahead
        self._fetching: asyncio.Task[None] | None = None
        self._path = Path()  # unused: kept for the base class's attribute set

    def start(self) -> None:
        self._fetch()

    def allocate(self) -> int:
        if self._next >= self._end and self._blocks:
            start, length = self._blocks.popleft()
            self._next, self._end, self._size = start, start + length, length
        if self._next >= self._end:
            self._fetch()
            raise CoordinatorLoadInProgressError(
                "waiting for a block of producer ids from the controller")
        pid = self._next
        self._next += 1
        if not self._blocks and self._end - self._next <= self._size * (1 - PREFETCH_AT):
            self._fetch()
        return pid

    def _fetch(self) -> None:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._request())

    async def _request(self) -> None:
        agent = self.agent
        while agent.broker.opened:
            if agent.broker_epoch < 0:  # not registered yet: the controller would refuse
                await asyncio.sleep(RETRY_S)
                continue
            request = AllocateProducerIdsRequest(broker_id=agent.node_id,
                                                 broker_epoch=agent.broker_epoch)
            try:
                response = await agent.controller_request(request, 0)
            except KafkaError as exc:
                log.info("AllocateProducerIds failed: %s", exc)
                await asyncio.sleep(RETRY_S)
                continue
            assert isinstance(response, AllocateProducerIdsResponse)
            if response.error_code == 0 and response.producer_id_len > 0:
                self._blocks.append((response.producer_id_start, response.producer_id_len))
                log.info("producer ids %d-%d from the controller",
                         response.producer_id_start,
                         response.producer_id_start + response.producer_id_len - 1)
                return
            log.info("AllocateProducerIds refused with error %d", response.error_code)
            await asyncio.sleep(RETRY_S)
