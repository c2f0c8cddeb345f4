"""The ``/metrics`` HTTP endpoint, served on the broker's own event loop.

Serving on the loop (not on ``prometheus_client``'s server thread) means a scrape reads
the broker's state from its owner, between two handlers, so counters and gauges are a
consistent snapshot and no lock is needed on the hot path. One request per connection
(HTTP/1.0 style, ``Connection: close``); Prometheus' text format, or OpenMetrics when the
scraper asks for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from prometheus_client.exposition import choose_encoder

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["MetricsEndpoint"]


class Collects(Protocol):
    def collect(self) -> Iterable[Metric]: ...

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 10.0
MAX_HEADER_BYTES = 16 * 1024
METRICS_PATHS = ("/metrics", "/")


class MetricsEndpoint:
    """Serves one node's metrics (``collector``: a broker's or a controller's) over HTTP
    until :meth:`close`."""

    def __init__(self, collector: Collects) -> None:
        self.collector = collector
        self.host = ""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: a free port); the bound port."""
        self._server = await asyncio.start_server(self._serve, host or None, port,
                                                  reuse_address=True)
        self.host = host
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    @property
    def url(self) -> str:
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/metrics"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                     ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            await asyncio.wait_for(self._answer(reader, writer), READ_TIMEOUT_S)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass  # a slow or vanished scraper: drop the connection
        except Exception:
            log.exception("serving a metrics scrape failed")
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEADER_BYTES:
            await _reply(writer, 431, b"request header too large\n")
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3:
            await _reply(writer, 400, b"bad request line\n")
            return
        method, target = parts[0], parts[1]
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if method not in ("GET", "HEAD"):
            await _reply(writer, 405, b"only GET and HEAD\n", extra={"Allow": "GET, HEAD"})
            return
        path = target.split("?", 1)[0]
        if path not in METRICS_PATHS:
            await _reply(writer, 404, b"metrics are at /metrics\n")
            return
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(self.collector)
        await _reply(writer, 200, body, content_type=content_type, head=method == "HEAD")


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large"}


async def _reply(writer: asyncio.StreamWriter, status: int, body: bytes, *,
                 content_type: str = "text/plain; charset=utf-8",
                 extra: dict[str, str] | None = None, head: bool = False) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
             f"Content-Length: {len(body)}", "Connection: close"]
    lines.extend(f"{name}: {value}" for name, value in (extra or {}).items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head:
        writer.write(body)
    await writer.drain()
