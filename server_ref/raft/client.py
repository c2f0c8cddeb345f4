"""The quorum's outbound side: one connection to one peer, Kafka framing, pipelined.

The broker side must not import ``sdk.net`` (the layer rule keeps the client's connection
logic from hiding broker bugs), so this is a small client of its own over the shared codecs.
A failed or timed-out call closes the connection; the next call opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib

from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message

READ_CHUNK = 256 * 1024


class PeerUnavailableError(ConnectionError):
    """The peer could not be reached or did not answer in time."""


class PeerClient:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._writer: asyncio.StreamWriter | None = None
        self._framing: ClientFraming | None = None
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()

    async def _connect(self, timeout_s: float) -> None:
        async with self._connecting:
            if self._writer is not None:
                return
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise PeerUnavailableError(
                    f"{self.host}:{self.port} unreachable: {exc or type(exc).__name__}"
                ) from exc
            framing = ClientFraming(self.client_id)
            self._writer, self._framing = writer, framing
            self._reader_task = asyncio.get_running_loop().create_task(
                self._read_loop(reader, writer, framing))

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         framing: ClientFraming) -> None:
        error: BaseException = PeerUnavailableError(f"{self.host}:{self.port} closed")
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                for cid, response in framing.feed(data):
                    fut = self._pending.pop(cid, None)
                    if fut is not None and not fut.done():
                        fut.set_result(response)
        except (OSError, ValueError) as exc:  # MalformedDataError is a ValueError too
            error = PeerUnavailableError(f"{self.host}:{self.port}: {exc}")
        finally:
            self._drop(writer, error)

    def _drop(self, writer: asyncio.StreamWriter, error: BaseException) -> None:
        if self._writer is writer:
            self._writer = None
            self._framing = None
            pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(error)
        writer.close()

    async def call(self, request: Message, version: int, timeout_s: float) -> Message:
        """Send ``request`` at ``version`` and wait for its answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await self._connect(timeout_s)
        writer, framing = self._writer, self._framing
        if writer is None or framing is None:
            raise PeerUnavailableError(f"{self.host}:{self.port} closed")
        cid, frame = framing.encode_request(request, version)
        fut: asyncio.Future[Message] = loop.create_future()
        self._pending[cid] = fut
        try:
            writer.write(frame)
            return await asyncio.wait_for(fut, max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError as exc:
            self._drop(writer, PeerUnavailableError("timed out"))
            raise PeerUnavailableError(
                f"{self.host}:{self.port} did not answer within {timeout_s:.1f}s") from exc
        except OSError as exc:
            self._drop(writer, exc)
            raise PeerUnavailableError(f"{self.host}:{self.port}: {exc}") from exc
        finally:
            self._pending.pop(cid, None)

    async def close(self) -> None:
        writer, task = self._writer, self._reader_task
        if writer is not None:
            self._drop(writer, PeerUnavailableError("client closed"))
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
