"""Cluster mode: reading partitions of ``__remote_log_metadata`` this broker holds no replica
of, from their leaders over the network.

The metadata topic has at most 3 replicas per partition, so with more brokers a broker can
lead or follow a tiered partition whose events live in a metadata partition it does not
host: replaying only local replicas, it would never learn what was copied (a new leader
would copy again, serve no remote data, and a follower would never drop local segments).
Kafka's ``TopicBasedRemoteLogMetadataManager`` subscribes a consumer to the metadata
partitions of the user partitions the broker leads or follows; this is that consumer:
a Fetch (replica id -1, so up to the high watermark: only acknowledged events) to each
such metadata partition's leader, from the position the broker's replay reached.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sdk.errors import OffsetOutOfRangeError
from sdk.protocol.messages.fetch import FetchRequest, FetchResponse
from server_ref.cluster.peer import PeerConnection

if TYPE_CHECKING:
    from server_ref.cluster.agent import ClusterAgent

__all__ = ["MetadataFetcher"]

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topics by name, replica id in the request
FETCH_TIMEOUT_S = 5.0
MAX_PARTITION_BYTES = 1 << 20


class MetadataFetcher:
    """Fetches metadata partitions from their leaders: one connection per leader, kept and
    re-aimed when a leader's endpoint changes."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._peers: dict[int, PeerConnection] = {}

    async def fetch(self, cluster: ClusterAgent, topic: str, index: int, offset: int
                    ) -> tuple[bytes, int] | None:
        """(record bytes from ``offset`` up to the leader's high watermark, the next offset
        to ask for when they are empty), or None when the leader cannot answer now (none,
        unreachable, or not the leader any more: the next run asks again)."""
        image = cluster.image.topics.get(topic)
        found = None if image is None else image.partitions.get(index)
        leader = -1 if found is None else found.leader
        endpoint = cluster.endpoint_of(leader) if leader >= 0 else None
        if endpoint is None:
            return None
        peer = self._peers.get(leader)
        if peer is None:
            peer = self._peers[leader] = PeerConnection(endpoint[0], endpoint[1],
                                                        self.client_id)
        peer.retarget(*endpoint)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=MAX_PARTITION_BYTES,
            isolation_level=0, session_id=0, session_epoch=-1, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=index, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=MAX_PARTITION_BYTES)])])
        try:
            response = await peer.request(request, FETCH_VERSION, FETCH_TIMEOUT_S)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.debug("%s-%d: leader %d unreachable: %s", topic, index, leader, exc)
            return None
        assert isinstance(response, FetchResponse)
        if response.error_code or not response.responses \
                or not response.responses[0].partitions:
            return None
        data = response.responses[0].partitions[0]
        if data.error_code == OffsetOutOfRangeError.errno and data.log_start_offset > offset:
            return b"", data.log_start_offset  # retention went past us: go on from there
        if data.error_code:
            return None
        return bytes(data.records or b""), offset

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()
        self._peers.clear()

