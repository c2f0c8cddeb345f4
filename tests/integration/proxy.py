"""A TCP proxy in front of a broker that can swallow requests, for brokers without a control
surface (tansu): while ``swallowing``, bytes from clients are read and dropped, so requests
are never handled and never answered - the client sees a request timeout with an unknown
outcome, the broker sees an idle connection.

A connection that dropped bytes is out of step with the Kafka framing for good: it keeps
dropping, and ``resume()`` closes it so the client reconnects cleanly.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from .conftest import free_port

_CHUNK = 65536


class _Link:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.dropped = False

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class SwallowingProxy:
    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self.swallowing = False
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def swallow(self) -> None:
        self.swallowing = True

    def resume(self) -> None:
        """Forward again; connections that dropped bytes are closed."""
        self.swallowing = False
        with self._lock:
            broken = [link for link in self._links if link.dropped]
            self._links = [link for link in self._links if not link.dropped]
        for link in broken:
            link.close()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                continue  # closed: the loop ends
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()  # the broker is not up: the client retries
                continue
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._pump_up, args=(link,), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(link,), daemon=True).start()

    def _pump_up(self, link: _Link) -> None:
        with contextlib.suppress(OSError):
            while data := link.client.recv(_CHUNK):
                if self.swallowing or link.dropped:
                    link.dropped = True
                    continue
                link.upstream.sendall(data)
        link.close()

    def _pump_down(self, link: _Link) -> None:
        with contextlib.suppress(OSError):
            while data := link.upstream.recv(_CHUNK):
                link.client.sendall(data)
        link.close()
