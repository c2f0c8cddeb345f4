"""A node's connection to another node: requests out, responses matched back, in order.

Brokers talk to the active controller (registration, heartbeats, AlterPartition, forwarded
admin requests) and to partition leaders (replica Fetch, OffsetForLeaderEpoch). The broker
must not use the SDK's network layer (layers rule: server_ref shares only codecs), so this
is a small client of its own on asyncio streams and ``sdk.protocol``'s ``ClientFraming``.
A failed connection fails every request waiting on it with ``ConnectionError``; the next
request connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message
from server_ref.cluster.peer_security import PeerSecurity

log = logging.getLogger(__name__)

__all__ = ["PeerConnection"]

CONNECT_TIMEOUT_S = 2.0
_inter_broker: PeerSecurity | None = None  # set once per broker process


def use_inter_broker_security(security: PeerSecurity | None) -> None:
    """How this process's connections to other brokers authenticate (None: PLAINTEXT);
    set by the broker's cluster agent before any connection is made."""
    global _inter_broker
    _inter_broker = security


class PeerConnection:
    """One TCP connection to ``host:port``, pipelined, reconnected on demand."""

    def __init__(self, host: str, port: int, client_id: str, *, to_broker: bool = True
                 ) -> None:
        self.host = host
        # Brokers' listeners use the inter-broker security; controllers' stay PLAINTEXT.
        self.security = _inter_broker if to_broker else None
        self.port = port
        self.client_id = client_id
        self._writer: asyncio.StreamWriter | None = None
        self._framing: ClientFraming | None = None
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self.closed = False

    def retarget(self, host: str, port: int) -> None:
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._drop(ConnectionError("peer moved"))

    async def request(self, message: Message, version: int, timeout_s: float) -> Message:
        """Send ``message`` at ``version``; its response, or ``ConnectionError`` /
        ``TimeoutError`` (the connection is dropped then: a late answer would be orphaned)."""
        await asyncio.wait_for(self._connect(), CONNECT_TIMEOUT_S)
        assert self._framing is not None and self._writer is not None
        cid, frame = self._framing.encode_request(message, version)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[cid] = future
        self._writer.write(frame)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self._drop(ConnectionError(f"no answer from {self.host}:{self.port}"))
            raise
        finally:
            self._waiting.pop(cid, None)

    async def _connect(self) -> None:
        if self.closed:
            raise ConnectionError("peer connection closed")
        async with self._connecting:
            if self._writer is not None:
                return
            if self.security is None:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            else:  # TLS and SASL first, as the inter-broker listener asks
                reader, writer = await self.security.open(self.host, self.port,
                                                          self.client_id)
            self._writer = writer
            self._framing = ClientFraming(client_id=self.client_id)
            self._reader_task = asyncio.get_running_loop().create_task(
                self._read(reader, writer, self._framing))

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    framing: ClientFraming) -> None:
        error: BaseException = ConnectionError(f"{self.host}:{self.port} closed the connection")
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    break
                for cid, response in framing.feed(data):
                    future = self._waiting.pop(cid, None)
                    if future is not None and not future.done():
                        future.set_result(response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reset, or a frame that does not decode
            error = ConnectionError(f"{self.host}:{self.port}: {exc}")
        if self._writer is writer:
            self._drop(error)

    def _drop(self, error: BaseException) -> None:
        writer, self._writer, self._framing = self._writer, None, None
        task, self._reader_task = self._reader_task, None
        if writer is not None:
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self.closed = True
        task = self._reader_task
        self._drop(ConnectionError("peer connection closed"))
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class LeaderWriter:
    """Appends records to partitions of internal topics at their leaders, acks=all, from
    any broker (the remote-log metadata and share-state journals): one connection per
    leader, kept and re-aimed when a leader's endpoint changes."""

    PRODUCE_VERSION = 9

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._peers: dict[int, PeerConnection] = {}

    async def produce(self, leader: int, endpoint: tuple[str, int], topic: str, index: int,
                      records: bytes, timeout_s: float) -> str | None:
        """One attempt: None once the ISR has ``records``, else what went wrong (a
        connection failure or the error code the leader answered)."""
        from sdk.protocol.messages.produce import ProduceRequest, ProduceResponse

        peer = self._peers.get(leader)
        if peer is None:
            peer = self._peers[leader] = PeerConnection(endpoint[0], endpoint[1],
                                                        self.client_id)
        peer.retarget(*endpoint)
        request = ProduceRequest(acks=-1, timeout_ms=int(timeout_s * 1000), topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=index, records=records)])])
        try:
            response = await peer.request(request, self.PRODUCE_VERSION, timeout_s + 2)
        except (ConnectionError, OSError, TimeoutError) as exc:
            return f"leader {leader} of {topic}-{index}: {exc}"
        assert isinstance(response, ProduceResponse)
        code = response.responses[0].partition_responses[0].error_code
        return None if code == 0 else f"leader {leader} of {topic}-{index} answered error {code}"

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()
        self._peers.clear()
