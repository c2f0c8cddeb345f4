"""The asyncio server: connections, framing, dispatch and in-order responses.

Each connection is an ``asyncio.Protocol``. Received bytes are cut into frames (bounded by
``socket.request.max.bytes``) and every request is dispatched at once, so a long-polling
fetch does not hold back the requests behind it; responses still leave in request order.
A handler that answers synchronously on an idle connection is written straight away; as
soon as one response is pending, later ones queue behind it and a writer task drains the
queue in order. Fetch responses may carry file regions, sent with ``loop.sendfile``.

A malformed, truncated or oversized frame, or a request that cannot be decoded, closes that
connection only (and is logged). A request for an API the broker does not implement is
answered with that API's response carrying UNSUPPORTED_VERSION when the response shape
allows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import pkgutil
import socket
from collections import deque
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import server_ref.handlers as handlers_pkg
from sdk.errors import KafkaError, MalformedDataError, UnsupportedVersionError
from sdk.protocol.framing import FrameBuffer, ReceivedRequest, ServerFraming
from sdk.protocol.message import Message
from server_ref.handlers import REGISTRY, RequestContext
from server_ref.handlers.fetch_encoding import FileRecords, OutgoingFrame, encode_frame
from server_ref.handlers.unsupported import error_response
from server_ref.metrics import start_metrics
from server_ref.security.listeners import ListenerSetup
from server_ref.security.sasl import SaslGate, SaslSettings
from server_ref.security.setup import build_listeners
from server_ref.security.tls import client_principal

if TYPE_CHECKING:
    from server_ref.broker import Broker

log = logging.getLogger(__name__)

__all__ = ["KafkaServer", "load_handlers", "start_broker", "stop_broker"]

API_VERSIONS_KEY = 18
MAX_QUEUED_RESPONSES = 512  # stop reading from a client this far ahead of its responses

Outgoing = bytes | OutgoingFrame | None


def load_handlers() -> None:
    """Import every module of ``server_ref.handlers`` so their ``@handles`` run."""
    for info in pkgutil.iter_modules(handlers_pkg.__path__):
        importlib.import_module(f"{handlers_pkg.__name__}.{info.name}")


class Connection(asyncio.Protocol):
    def __init__(self, server: KafkaServer, listener: ListenerSetup | None = None) -> None:
        self.server = server
        self.broker = server.broker
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.frames = FrameBuffer(int(self.broker.config.get("socket.request.max.bytes")))
        self.listener = listener
        self.listener_name = listener.name if listener is not None else "PLAINTEXT"
        self.principal = "User:ANONYMOUS"
        self.tls = listener is not None and listener.uses_tls
        # SASL listeners: every frame passes the gate first (the one check plaintext pays).
        self.gate: SaslGate | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        if listener is not None and isinstance(listener.sasl, SaslSettings):
            self.gate = SaslGate(self, listener.sasl)
            self.frames.max_frame_bytes = min(self.frames.max_frame_bytes,
                                              listener.sasl.max_receive)
        self.queue: deque[asyncio.Future[Outgoing] | Outgoing] = deque()
        self.writer: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closed = False
        self._write_paused = False
        self._read_paused = False

    # ------------------------------------------------------------------ transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.server.stopping:
            # Accepted just before the listener closed and set up after the server's stop
            # swept its connections: it would serve from a closed broker. Refuse it.
            self.closed = True
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        self.server.connections.add(self)
        if self.broker.metrics is not None:
            self.broker.metrics.connection_opened(self.listener_name)
        if self.tls and self.gate is None:  # SSL: the client certificate names the client
            self.principal = client_principal(transport.get_extra_info("ssl_object"))
        if self.gate is not None and self.listener is not None:
            self._auth_timer = asyncio.get_running_loop().call_later(
                self.listener.idle_ms / 1000, self._authentication_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        self.server.connections.discard(self)
        for task in list(self.tasks):
            task.cancel()
        if self.writer is not None:
            self.writer.cancel()
        for item in self.queue:
            _discard(item)
        self.queue.clear()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = self._write_paused or len(self.queue) >= MAX_QUEUED_RESPONSES
        if should_pause and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.frames.feed(data)
        except MalformedDataError as exc:
            self.abort(f"bad frame: {exc}")
            return
        gate = self.gate
        for payload in frames:
            if self.closed:
                return
            if gate is not None and gate.intercept(payload):
                continue
            try:
                received = ServerFraming.parse(payload)
            except (MalformedDataError, UnsupportedVersionError) as exc:
                self.abort(f"undecodable request: {exc}")
                return
            self.dispatch(received)

    def abort(self, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ authentication

    def authenticated(self) -> None:
        """The SASL exchange succeeded: no deadline, frames up to the request limit."""
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        self.frames.max_frame_bytes = int(self.broker.config.get("socket.request.max.bytes"))

    def _authentication_timed_out(self) -> None:
        self._auth_timer = None
        if not self.closed:
            self.server.security_stats["timed_out"] += 1
            self.abort("authentication not finished within connections.max.idle.ms")

    def close_after_writes(self, reason: str, delay_s: float = 0.0) -> None:
        """Close ``delay_s`` after the responses queued so far are written (a failed
        authentication: Kafka's connection.failed.authentication.delay.ms)."""
        log.info("closing connection from %s: %s", self.peer, reason)
        self._track(asyncio.get_running_loop().create_task(self._close_when_written(delay_s)))

    async def _close_when_written(self, delay_s: float) -> None:
        while self.writer is not None and not self.closed:
            await asyncio.wait([self.writer])
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()  # flushes what is buffered, then closes

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, req: ReceivedRequest) -> None:
        ctx = RequestContext(self.broker, req.api_key, req.api_version, req.correlation_id,
                             req.client_id, self.peer, self.principal, self.listener_name)
        metrics = self.broker.metrics
        if metrics is not None:
            ctx.started_ns = metrics.request_started(req.api_key, req.api_version)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: request %d, API %d v%d (%s)", self.peer, req.correlation_id,
                      req.api_key, req.api_version, type(req.request).__name__)
        rule = self.broker.control.take(req.api_key, req.api_version, req.request)
        if rule is not None:
            self._enqueue(self._run_rule(rule, ctx, req))
            return
        try:
            result = self.handle(ctx, req)
            if isinstance(result, Awaitable):
                if asyncio.iscoroutine(result):
                    # Its own task: were the answering task cancelled (the connection
                    # closing) before it started, the handler's coroutine would be dropped
                    # unawaited, and Python warns about it.
                    result = self._track(asyncio.get_running_loop().create_task(result))
                self._enqueue(self._await_result(ctx, result))
            else:
                self._enqueue_ready(self._encode(ctx, result))
        except _Unanswerable as exc:
            self.abort(str(exc))
        except Exception:
            log.exception("handler for API %d v%d failed (from %s)", req.api_key,
                          req.api_version, self.peer)
            self.abort("handler failed")

    def handle(self, ctx: RequestContext, req: ReceivedRequest) -> Any:
        registration = REGISTRY.get(req.api_key)
        request = req.request
        if req.api_key == API_VERSIONS_KEY and (
            registration is None or request is None
            or not registration.min_version <= req.api_version <= registration.max_version
        ):
            # KIP-511: answer an unknown ApiVersions version in v0 with our ranges.
            from server_ref.handlers.api_versions import unsupported_version_response

            ctx.api_version = 0
            return unsupported_version_response()
        if request is None:
            raise _Unanswerable(req.error or "unknown request")
        if registration is None or not (
            registration.min_version <= req.api_version <= registration.max_version
        ):
            try:
                return error_response(req.api_key, req.api_version, request,
                                      UnsupportedVersionError.errno)
            except LookupError:
                raise _Unanswerable(f"API {req.api_key} v{req.api_version} is not "
                                    "supported and its response has no error field") from None
        return registration.handler(ctx, request)

    def _encode(self, ctx: RequestContext, response: Message | None) -> Outgoing:
        if self.broker.metrics is not None:
            self.broker.metrics.request_answered(ctx)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: response %d, API %d: %s", self.peer, ctx.correlation_id,
                      ctx.api_key, "none" if response is None else type(response).__name__)
        if response is None or self.closed:
            return None
        return encode_frame(ctx.api_key, ctx.api_version, ctx.correlation_id, response)

    async def _await_result(self, ctx: RequestContext, result: Awaitable[Message | None]
                            ) -> Outgoing:
        return self._encode(ctx, await result)

    async def _run_rule(self, rule: Any, ctx: RequestContext, req: ReceivedRequest
                        ) -> Outgoing:
        outcome = await rule.apply(ctx, req.request, lambda: self.handle(ctx, req))
        if outcome is rule.CLOSE:
            self.abort(f"control surface closed the connection on API {req.api_key}")
            return None
        return self._encode(ctx, outcome)

    # ------------------------------------------------------------------ ordered writing

    def _enqueue_ready(self, out: Outgoing) -> None:
        if not self.queue and self.writer is None:
            self._write(out)
            return
        self.queue.append(out)
        self._update_reading()

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Keep ``task`` until it is done; closing the connection cancels it."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _enqueue(self, coro: Any) -> None:
        task = self._track(asyncio.get_running_loop().create_task(coro))
        self.queue.append(task)
        self._update_reading()
        if self.writer is None:
            self.writer = asyncio.get_running_loop().create_task(self._drain())

    def _write(self, out: Outgoing) -> None:
        if out is None or self.closed or self.transport is None:
            return
        if isinstance(out, bytes):
            self.transport.write(out)
            return
        # A frame with file regions needs awaiting: hand it to the writer task.
        self.queue.appendleft(out)
        if self.writer is None:
            self.writer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self.queue and not self.closed:
                item = self.queue[0]
                if isinstance(item, asyncio.Future):
                    try:
                        out = await item
                    except _Unanswerable as exc:
                        self.abort(str(exc))
                        return
                    except asyncio.CancelledError:
                        if self.closed:
                            return
                        raise
                    except Exception:
                        log.exception("request from %s failed", self.peer)
                        self.abort("handler failed")
                        return
                else:
                    out = item
                self.queue.popleft()
                self._update_reading()
                if isinstance(out, OutgoingFrame):
                    await self._send_frame(out)
                elif out is not None and self.transport is not None and not self.closed:
                    self.transport.write(out)
        finally:
            self.writer = None
            if self.queue and not self.closed:
                self.writer = asyncio.get_running_loop().create_task(self._drain())

    async def _send_frame(self, frame: OutgoingFrame) -> None:
        loop = asyncio.get_running_loop()
        try:
            for part in frame.parts:
                if self.closed or self.transport is None:
                    return
                if isinstance(part, FileRecords) and self.tls:
                    # sendfile cannot encrypt: copy the regions through the TLS transport.
                    for file, position, size in part.chunks:
                        data = os.pread(file.fileno(), size, position)
                        if len(data) != size:
                            raise OSError(f"read {len(data)} of {size} bytes")
                        self.transport.write(data)
                elif isinstance(part, FileRecords):
                    for file, position, size in part.chunks:
                        sent = await loop.sendfile(self.transport, file, position, size)
                        if sent != size:
                            raise OSError(f"sendfile sent {sent} of {size} bytes")
                        self.server.file_bytes_sent += size
                else:
                    self.transport.write(part)
        except (OSError, RuntimeError) as exc:
            self.abort(f"sending fetch data failed: {exc}")
        finally:
            frame.close()


class _Unanswerable(KafkaError):
    """A request the broker cannot decode or answer: Kafka closes the connection."""


def _discard(item: Any) -> None:
    if isinstance(item, OutgoingFrame):
        item.close()
    elif isinstance(item, asyncio.Future):
        item.cancel()


class KafkaServer:
    """Listens on one address and serves the broker's handlers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections: set[Connection] = set()
        self.file_bytes_sent = 0  # fetch data sent straight from segment files
        self.stopping = False
        self._server: asyncio.Server | None = None
        self._servers: list[asyncio.Server] = []
        self.ports: dict[str, int] = {}  # bound port per listener name
        self.protocols: dict[str, str] = {}  # security protocol per listener name
        self.hosts: dict[str, str] = {}  # bind address per listener name ("": every one)
        # Authentications, re-authentications, failures, sessions closed on expiry, and
        # connections closed for not authenticating in time (for tests and operators).
        self.security_stats = dict.fromkeys(
            ("authenticated", "reauthenticated", "failed", "expired", "timed_out"), 0)

    async def start(self, host: str, port: int) -> int:
        """Listen on one PLAINTEXT address; the bound port."""
        listener = ListenerSetup("PLAINTEXT", "PLAINTEXT", host, port, host, None)
        return (await self.start_listeners([listener]))["PLAINTEXT"]

    async def start_listeners(self, listeners: list[ListenerSetup],
                              ports: Mapping[str, int] | None = None) -> dict[str, int]:
        """Listen on every listener (port 0: ``ports``' earlier choice, else a free one)."""
        load_handlers()
        loop = asyncio.get_running_loop()
        for listener in listeners:
            port = listener.port or (ports or {}).get(listener.name, 0)
            tls: dict[str, Any] = {}
            if listener.ssl_context is not None:
                tls = {"ssl": listener.ssl_context,
                       "ssl_handshake_timeout": listener.idle_ms / 1000}
            server = await loop.create_server(
                lambda listener=listener: Connection(self, listener),
                listener.host or None, port, reuse_address=True, backlog=1024, **tls)
            self._servers.append(server)
            self.ports[listener.name] = int(server.sockets[0].getsockname()[1])
            self.protocols[listener.name] = listener.protocol
            self.hosts[listener.name] = listener.host
        self._server = self._servers[0] if self._servers else None
        return dict(self.ports)

    async def stop(self) -> None:
        self.stopping = True
        for listening in self._servers:
            listening.close()
        pending: list[asyncio.Task[Any]] = []
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
            conn.closed = True
            pending.extend(conn.tasks)
            if conn.writer is not None:
                pending.append(conn.writer)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for listening in self._servers:
            await listening.wait_closed()
        self._servers.clear()
        self._server = None


async def start_broker(broker: Broker, host: str, port: int,
                       listener_ports: Mapping[str, int] | None = None,
                       metrics_port: int | None = None) -> KafkaServer:
    """Open the broker's state, then listen on its listeners (``listeners``, or one PLAINTEXT
    listener on host:port); ``broker.port`` is the first listener's bound port after, and
    ``broker.endpoints`` what each listener's clients are told. With ``metrics_port`` (0: a
    free one), ``/metrics`` is served on host:metrics_port (``broker.metrics.endpoint``)."""
    if not broker.opened:
        broker.open()
    server = KafkaServer(broker)
    try:
        config = broker.config
        listeners = build_listeners(config.security, host, port, config.advertised_host,
                                    broker.credentials)
        if metrics_port is not None:
            await start_metrics(broker, server, host, metrics_port)
        bound = await server.start_listeners(listeners, listener_ports)
        broker.endpoints = {
            lst.name: (lst.advertised_host, lst.advertised_port or bound[lst.name])
            for lst in listeners}
        broker.host, broker.port = broker.endpoints[listeners[0].name]
        await broker.start()
    except BaseException:
        await server.stop()
        if broker.metrics is not None:
            await broker.metrics.close()
        broker.close()
        raise
    log.info("broker %d serving %s:%d (cluster %s)", broker.node_id, host, broker.port,
             broker.cluster_id)
    return server


async def stop_broker(broker: Broker, server: KafkaServer) -> None:
    await server.stop()
    if broker.metrics is not None:
        await broker.metrics.close()
    await broker.stop()
