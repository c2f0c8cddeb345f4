"""The controller listener: Kafka framing over asyncio streams, a small dispatch table.

A voter answers the quorum's APIs here (``server_ref.handlers.raft``); the controller adds
its own (BrokerRegistration, CreateTopics, ...) with :meth:`ControllerServer.register`.
ApiVersions advertises exactly what is registered. Requests run concurrently (a Fetch may
wait for new entries) and their responses leave in request order, as Kafka requires.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sdk.errors import MalformedDataError, UnsupportedVersionError
from sdk.protocol.framing import FrameBuffer, ServerFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from server_ref.handlers.unsupported import error_response

log = logging.getLogger("server_ref.raft.server")

# handler(request, api_version) -> response, or an awaitable of it
Handler = Callable[[Any, int], "Message | Awaitable[Message]"]
API_VERSIONS = 18
READ_CHUNK = 256 * 1024


class ControllerServer:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._handlers: dict[int, tuple[int, int, Handler]] = {}
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self.register(API_VERSIONS, 0, 4, self._api_versions)

    def register(self, api_key: int, min_version: int, max_version: int,
                 handler: Handler) -> None:
        """Serve ``api_key`` in ``min_version..max_version`` (replaces an earlier handler)."""
        if not 0 <= min_version <= max_version:
            raise ValueError(f"bad version range {min_version}..{max_version}")
        self._handlers[api_key] = (min_version, max_version, handler)

    def _api_versions(self, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
        return ApiVersionsResponse(api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi, _h) in sorted(self._handlers.items())])

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the sockets ends each connection's read loop; cancelling the tasks
        # instead makes asyncio's stream callback log the cancellation as an error.
        for writer in list(self._connections.values()):
            writer.close()
        if self._connections:
            _done, pending = await asyncio.wait(list(self._connections), timeout=2)
            for task in pending:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    # ------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        frames = FrameBuffer()
        answers: asyncio.Queue[asyncio.Future[bytes | None] | None] = asyncio.Queue()
        sender = asyncio.get_running_loop().create_task(self._send_in_order(answers, writer))
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                for payload in frames.feed(data):
                    answers.put_nowait(asyncio.ensure_future(self._answer(payload)))
        except (OSError, MalformedDataError) as exc:
            log.debug("controller connection closed: %s", exc)
        finally:
            answers.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            writer.close()
            self._connections.pop(task, None)

    async def _send_in_order(self, answers: asyncio.Queue[asyncio.Future[bytes | None] | None],
                             writer: asyncio.StreamWriter) -> None:
        while (fut := await answers.get()) is not None:
            try:
                frame = await fut
            except asyncio.CancelledError:
                raise
            except Exception:  # a handler bug: the connection cannot answer in order anymore
                log.exception("controller request failed; closing the connection")
                writer.close()
                return
            if frame is None:
                writer.close()
                return
            writer.write(frame)
            with contextlib.suppress(OSError):
                await writer.drain()

    async def _answer(self, payload: bytes) -> bytes | None:
        try:
            req = ServerFraming.parse(payload)
        except (MalformedDataError, UnsupportedVersionError) as exc:
            log.warning("undecodable request on the controller listener: %s", exc)
            return None
        entry = self._handlers.get(req.api_key)
        version = req.api_version
        if req.api_key == API_VERSIONS and (
                entry is None or req.request is None or not entry[0] <= version <= entry[1]):
            response: Message = ApiVersionsResponse(
                error_code=UnsupportedVersionError.errno,
                api_keys=self._api_versions(ApiVersionsRequest(), 0).api_keys)
            version = 0
        elif req.request is None or entry is None:
            log.warning("unsupported request on the controller listener: %s",
                        req.error or f"API {req.api_key}")
            return None  # Kafka closes the connection on an API it does not serve
        elif not entry[0] <= version <= entry[1]:
            try:
                response = error_response(req.api_key, version, req.request,
                                          UnsupportedVersionError.errno)
            except LookupError:
                return None
        else:
            result = entry[2](req.request, version)
            response = await result if inspect.isawaitable(result) else result
        return ServerFraming.encode_response(req.api_key, version, req.correlation_id, response)
