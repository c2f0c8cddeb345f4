"""One asyncio TCP connection to one broker: handshake, pipelined requests, timeouts.

:class:`BrokerConnection` is opened with :meth:`BrokerConnection.open`, which connects and
runs the ApiVersions handshake (v3, falling back to v0 for brokers older than Kafka 2.4), so
an open connection knows the version range of every API the broker supports.

Requests are pipelined: :meth:`BrokerConnection.send_nowait` writes the request at once and
returns an asyncio future for its response (or None when no response is expected: Produce
with acks=0). Responses arrive in request order and are matched by correlation id (the
sans-IO :class:`sdk.protocol.framing.ClientFraming` does the matching and drops a stray reply
to an acks=0 request, which tansu sends). :meth:`BrokerConnection.send` is the awaitable
form. ``in_flight`` counts requests still waiting for a response, for in-flight limits.

Failure handling: a request that gets no response within its timeout closes the connection
(responses come in order, so everything behind it is stuck too) and fails with
:class:`sdk.errors.RequestTimeoutError` (defined here until it moved to ``sdk.errors``; still
importable from here and from ``sdk.net``); a closed or broken connection fails every waiting request with
:class:`sdk.errors.KafkaConnectionError` (retriable, invalid-metadata: the broker may have
handed its leaderships on). ``on_close`` callbacks let the owner (the network client) forget
the connection. Nothing here retries; that is the caller's policy.

Security (:mod:`sdk.net.security`): with ``SSL`` / ``SASL_SSL`` the socket is wrapped in
TLS (a failed handshake, an untrusted certificate or a wrong host name is an
:class:`sdk.errors.SslAuthenticationError`); with ``SASL_*`` the SASL exchange follows
ApiVersions. When the broker gives the session a lifetime (KIP-368,
``connections.max.reauth.ms`` or a token's expiry) the connection authenticates again on
the same socket at 85-95% of it: requests already sent complete normally, and requests
made meanwhile are held (their bytes buffered by swapping the transport the send path
writes to, so the steady-state path checks nothing) and written once it succeeded.

All methods must be called on the event loop that opened the connection.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import random
import re
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    KafkaConnectionError,
    KafkaError,
    MalformedDataError,
    RequestTimeoutError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sdk.protocol.versions import our_versions, pick_version, ranges_from_response

if TYPE_CHECKING:
    from sdk.metrics.network import NetworkObserver
    from sdk.net.security import Security

__all__ = ["BrokerConnection", "RequestTimeoutError", "SOFTWARE_NAME", "SOFTWARE_VERSION",
           "describe_connect_error"]

log = logging.getLogger(__name__)

SOFTWARE_NAME = "kafka-sdk"
SOFTWARE_VERSION = "0.1.0"
_HANDSHAKE_VERSION = 3  # first flexible ApiVersions (KIP-511); v0 is the fallback
_OUR_VERSIONS = our_versions()


def describe_connect_error(host: str, port: int, exc: OSError) -> str:
    """Why a TCP connect failed, in words with the errno's name: ``connection to
    127.0.0.1:9999 refused (ECONNREFUSED)``, ``cannot resolve host 'kafka' (EAI_NONAME: Name
    or service not known)``, ``cannot connect to 10.0.0.9:9092: No route to host
    (EHOSTUNREACH)``."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        name = _EAI_NAMES.get(exc.errno or 0, f"EAI {exc.errno}")
        return f"cannot resolve host {host!r} ({name}: {exc.strerror})"
    code = exc.errno
    text = exc.strerror
    if code is None:
        # asyncio tried several addresses (localhost: ::1 and 127.0.0.1) and lists every
        # failure in one message; one errno shared by all is still the cause.
        codes = set(re.findall(r"\[Errno (\d+)\]", str(exc)))
        if len(codes) == 1:
            code = int(codes.pop())
            text = os.strerror(code)
    if code == errno.ECONNREFUSED:
        return f"connection to {address} refused (ECONNREFUSED)"
    if code is not None:
        return f"cannot connect to {address}: {text} ({errno.errorcode.get(code, code)})"
    return f"cannot connect to {address}: {exc}"


_EAI_NAMES = {getattr(socket, n): n for n in dir(socket) if n.startswith("EAI_")}
_REAUTH_SHARE = (0.85, 0.95)  # re-authenticate within this share of the session (as Java)
_MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's brokers: at most one re-authentication a second
# A request is read by Kafka's broker only once those ahead of it on the connection are
# answered, so one sent just before the hold, behind a long-polling Fetch (500 ms by
# default), could be read after the session ended, which closes the connection.
_REAUTH_MARGIN_S = 0.6


def _tls_error(host: str, port: int, node_id: int, exc: BaseException) -> SslAuthenticationError:
    reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
    hint = ""
    if isinstance(exc, ssl.SSLCertVerificationError):
        hint = " (is the broker's CA in ssl_cafile / ssl.truststore.location?)"
        if "hostname" in str(reason).lower() or "ip address mismatch" in str(reason).lower():
            hint = (f" (the certificate does not name {host!r}; "
                    "ssl_endpoint_identification_algorithm='' skips this check)")
    elif "WRONG_VERSION_NUMBER" in str(exc) or "record layer failure" in str(exc):
        hint = " (is this a TLS listener?)"
    return SslAuthenticationError(
        f"TLS handshake with {host}:{port} (node {node_id}) failed: {reason}{hint}", cause=exc)


class _HeldWrites:
    """Stands in for the transport while a re-authentication runs: requests made meanwhile
    are kept in order and written when it is over."""

    __slots__ = ("_real", "chunks")

    def __init__(self, real: asyncio.Transport) -> None:
        self._real = real
        self.chunks: list[bytes | bytearray] = []

    def write(self, data: bytes | bytearray) -> None:
        self.chunks.append(data)

    def close(self) -> None:
        self._real.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Protocol(asyncio.Protocol):
    """Hands transport events to the connection; kept apart so the connection has no
    asyncio-callback methods in its public surface."""

    __slots__ = ("_conn",)

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn

    def data_received(self, data: bytes) -> None:
        self._conn._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._on_lost(exc)

    def pause_writing(self) -> None:
        self._conn._write_paused = True

    def resume_writing(self) -> None:
        self._conn._on_resume_writing()


class BrokerConnection:
    """A connected, handshaken connection to one broker. Create with :meth:`open`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str | None,
        request_timeout_s: float,
        security: Security | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.request_timeout_s = request_timeout_s
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.close_reason: BaseException | None = None
        self.last_used = time.monotonic()
        self._framing = ClientFraming(client_id)
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._waiters: dict[int, tuple[asyncio.Future[Any], asyncio.TimerHandle | None]] = {}
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self._close_callbacks: list[Callable[[BrokerConnection], None]] = []
        self._versions_cache: dict[tuple[int, int | None], int] = {}
        self._handshake_version = 0
        self._security = security
        self._socket: asyncio.Transport | None = None  # the real one, also while held
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.session_lifetime_ms = 0
        self.reauthentications = 0
        # Metrics, hooks and protocol debugging (sdk.metrics.network): set by the client
        # after the handshake, None for a client that observes nothing.
        self.observer: NetworkObserver | None = None
        self.sent_at: dict[int, tuple[float, int, int]] = {}  # cid -> (time, api, version)

    # ------------------------------------------------------------------ opening

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str | None,
        request_timeout_s: float,
        connect_timeout_s: float,
        security: Security | None = None,
    ) -> BrokerConnection:
        """Connect, run the ApiVersions handshake and (with ``security``) TLS and SASL
        within ``connect_timeout_s``.

        Raises KafkaConnectionError (also for a timeout) when the broker cannot be reached
        or does not answer the handshake sensibly, and an AuthenticationError subclass
        when TLS or SASL fails.
        """
        try:
            return await asyncio.wait_for(
                cls._open(host, port, node_id=node_id, client_id=client_id,
                          request_timeout_s=request_timeout_s, security=security),
                connect_timeout_s,
            )
        except TimeoutError as exc:
            raise KafkaConnectionError(
                f"connecting to {host}:{port} (node {node_id}) took over {connect_timeout_s:g} s",
                cause=exc,
            ) from exc

    @classmethod
    async def _open(cls, host: str, port: int, *, node_id: int, client_id: str | None,
                    request_timeout_s: float, security: Security | None = None
                    ) -> BrokerConnection:
        conn = cls(host, port, node_id=node_id, client_id=client_id,
                   request_timeout_s=request_timeout_s, security=security)
        await conn._connect_socket()
        version = _HANDSHAKE_VERSION
        try:
            try:
                versions = await conn._handshake(version)
            except KafkaConnectionError as exc:
                # Brokers before Kafka 2.4 answer an ApiVersions version they do not know
                # with a v0 body that does not decode as v3: retry the handshake with v0.
                if not isinstance(exc.__cause__, MalformedDataError):
                    raise
                conn.close()
                conn = cls(host, port, node_id=node_id, client_id=client_id,
                           request_timeout_s=request_timeout_s, security=security)
                await conn._connect_socket()
                version = 0
                versions = await conn._handshake(version)
            conn.api_versions = versions
            conn._handshake_version = version
            if security is not None and security.sasl is not None:
                await conn._authenticate()
        except KafkaConnectionError as exc:
            conn.close()
            if isinstance(exc.__cause__, ssl.SSLError):
                # TLS 1.3: a broker refusing our certificate says so after the handshake.
                raise _tls_error(host, port, node_id, exc.__cause__) from exc.__cause__
            if (security is not None and security.ssl_context is not None
                    and isinstance(exc.__cause__, ConnectionResetError)):
                # Some brokers (asyncio servers) drop a connection whose client certificate
                # they refuse without the TLS alert that says so.
                raise KafkaConnectionError(
                    f"{exc}, right after the TLS handshake (does the listener require a "
                    "client certificate, ssl.client.auth=required?)", cause=exc) from exc
            if security is None and "frame size" in str(exc):
                # A TLS listener answers our plaintext with an alert record (0x15 0x03 ...).
                raise KafkaConnectionError(f"{exc} (a TLS listener? set security_protocol "
                                           "to SSL or SASL_SSL)", cause=exc) from exc
            raise
        except BaseException:
            conn.close()
            raise
        return conn

    # ------------------------------------------------------------------ SASL

    async def _authenticate(self, *, again: bool = False) -> None:
        """The SASL exchange (first time or ``again``); schedules the next one if the session
        has a lifetime."""
        from sdk.net.security import authenticate  # only SASL clients load it

        assert self._security is not None and self._security.sasl is not None
        lifetime = await authenticate(self._security.sasl, self._exchange, self.version_for,
                                      f"{self.address} (node {self.node_id})", again=again)
        self.session_lifetime_ms = lifetime
        if lifetime > 0 and not self._closed:
            session_s = lifetime / 1000
            delay = min(session_s * random.uniform(*_REAUTH_SHARE),
                        max(session_s - _REAUTH_MARGIN_S, session_s / 2))
            hold_s = 0.0
            if again and delay < _MIN_REAUTH_INTERVAL_S:
                # Kafka's brokers refuse a re-authentication begun less than 1 s after the
                # previous one (ILLEGAL_SASL_STATE; the first login does not count), timed
                # from when they read its SaslHandshake, which is before this exchange ended.
                # A session this short may end before then: requests are held from the due
                # time, so none reaches the broker on an expired session (which would close
                # the connection), and the handshake, which it takes even after the end,
                # goes out 1 s after this exchange ended.
                hold_s = _MIN_REAUTH_INTERVAL_S - delay
            self._reauth_timer = self._loop.call_later(delay, self._begin_reauth, hold_s)

    async def _exchange(self, request: Message, version: int) -> Any:
        """One SASL round trip written straight to the socket (past held writes)."""
        sock = self._socket
        if self._closed or sock is None:
            raise KafkaConnectionError(f"connection to {self.address} (node {self.node_id}) "
                                       "is closed", cause=self.close_reason)
        cid, data = self._framing.encode_request(request, version)
        sock.write(data)
        fut: asyncio.Future[Any] = self._loop.create_future()
        timeout = self.request_timeout_s
        timer = self._loop.call_at(self._loop.time() + timeout, self._on_timeout, cid, timeout)
        self._waiters[cid] = (fut, timer)
        return await fut

    def _begin_reauth(self, hold_s: float) -> None:
        self._reauth_timer = None
        if not self._closed:
            self._reauth_task = self._loop.create_task(self._reauthenticate(hold_s),
                                                       name="kafka-sdk-reauth")

    async def _reauthenticate(self, hold_s: float) -> None:
        sock = self._socket
        assert sock is not None
        held = _HeldWrites(sock)
        self._transport = held  # type: ignore[assignment]  # duck-typed: write and close
        try:
            if hold_s > 0:
                await asyncio.sleep(hold_s)
            await self._authenticate(again=True)
        except KafkaError as exc:
            log.warning("re-authentication with %s (node %s) failed: %s; closing the "
                        "connection", self.address, self.node_id, exc)
            self.close(exc)
            return
        finally:
            if not self._closed:
                self._transport = sock
                for chunk in held.chunks:
                    sock.write(chunk)
        self.reauthentications += 1
        log.debug("%s re-authenticated with %s (node %s); %d request(s) were held meanwhile",
                  self._framing.client_id, self.address, self.node_id, len(held.chunks))

    async def _connect_socket(self) -> None:
        context = self._security.ssl_context if self._security is not None else None
        try:
            if context is None:
                transport, _ = await self._loop.create_connection(
                    lambda: _Protocol(self), self.host, self.port
                )
            else:
                transport, _ = await self._loop.create_connection(
                    lambda: _Protocol(self), self.host, self.port, ssl=context,
                    server_hostname=self.host)
        except ssl.SSLError as exc:
            raise _tls_error(self.host, self.port, self.node_id, exc) from exc
        except OSError as exc:
            if context is not None and not str(exc) and exc.errno is None:
                # A plaintext listener drops the ClientHello without a word.
                raise KafkaConnectionError(
                    f"TLS handshake with {self.address} (node {self.node_id}) failed: the "
                    f"broker closed the connection (is this a TLS listener?)", cause=exc
                ) from exc
            raise KafkaConnectionError(
                f"{describe_connect_error(self.host, self.port, exc)} (node {self.node_id})",
                cause=exc,
            ) from exc
        assert isinstance(transport, asyncio.Transport)
        self._transport = self._socket = transport

    async def _handshake(self, version: int) -> dict[int, tuple[int, int]]:
        request = ApiVersionsRequest(client_software_name=SOFTWARE_NAME,
                                     client_software_version=SOFTWARE_VERSION)
        response = await self.send(request, version=version)
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code == 35 and version > 0:
            # UNSUPPORTED_VERSION with a readable body: the broker lists what it supports.
            self.close()
            raise KafkaConnectionError(
                f"broker {self.host}:{self.port} rejected ApiVersions v{version}",
                cause=MalformedDataError("ApiVersions version not supported"),
            )
        if response.error_code:
            self.close()
            raise KafkaConnectionError(
                f"ApiVersions handshake with {self.host}:{self.port} failed with error code "
                f"{response.error_code}"
            )
        return ranges_from_response(response.api_keys)

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent and still waiting for their response."""
        return len(self._waiters)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def add_close_callback(self, callback: Callable[[BrokerConnection], None]) -> None:
        """Call ``callback(conn)`` once when the connection closes (at once if it is closed)."""
        if self._closed:
            self._loop.call_soon(callback, self)
        else:
            self._close_callbacks.append(callback)

    def version_for(self, api_key: int, *, min_version: int = 0,
                    max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support (at most ``max_version``).

        Raises UnsupportedVersionError when there is none, or when it is below
        ``min_version`` (e.g. Produce needs v3+ to carry v2 record batches).
        """
        cache_key = (api_key, max_version)
        version = self._versions_cache.get(cache_key)
        if version is None:
            version = pick_version(api_key, self.api_versions, _OUR_VERSIONS, max_version)
            self._versions_cache[cache_key] = version
        if version < min_version:
            raise UnsupportedVersionError(
                f"broker {self.address} supports API key {api_key} only up to v{version}; "
                f"v{min_version}+ is needed"
            )
        return version

    # ------------------------------------------------------------------ requests

    def send_nowait(
        self,
        request: Message,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> asyncio.Future[Any] | None:
        """Write ``request`` now; return a future for the response (None without one).

        ``version`` defaults to the highest common version. ``timeout_s`` defaults to the
        connection's request timeout. Raises KafkaConnectionError if the connection is closed.
        The future fails with KafkaConnectionError / RequestTimeoutError as described above.
        """
        if self._closed or self._transport is None:
            raise KafkaConnectionError(
                f"connection to {self.address} (node {self.node_id}) is closed",
                cause=self.close_reason,
            )
        if version is None:
            version = self.version_for(request.API_KEY)
        cid, data = self._framing.encode_request(request, version,
                                                 expect_response=expect_response)
        self._transport.write(data)
        self.last_used = time.monotonic()
        if self.observer is not None:
            self.observer.sent(self, request.API_KEY, version, cid, len(data), expect_response)
        if not expect_response:
            return None
        fut: asyncio.Future[Any] = self._loop.create_future()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        timer = self._loop.call_at(self._loop.time() + timeout, self._on_timeout, cid, timeout)
        self._waiters[cid] = (fut, timer)
        return fut

    async def send(
        self,
        request: Message,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> Any:
        """Send ``request`` and await its response (None when ``expect_response`` is False)."""
        if self._write_paused:
            await self.wait_writable()
        fut = self.send_nowait(request, version, expect_response=expect_response,
                               timeout_s=timeout_s)
        if fut is None:
            return None
        return await fut

    async def barrier(self, timeout_s: float | None = None) -> None:
        """Round trip a cheap request (ApiVersions). A broker handles one connection's
        requests in order, so when this returns it has read every request written before,
        including those without a response (acks=0 Produce)."""
        if self._write_paused:
            await self.wait_writable()
        await self.barrier_nowait(timeout_s)

    def barrier_nowait(self, timeout_s: float | None = None) -> asyncio.Future[Any]:
        """Write a barrier request now; the returned future resolves with its answer.

        Besides proving the broker read what came before, its answer lets the framing
        forget the acks=0 requests before it (which a broker never answers)."""
        request = ApiVersionsRequest(client_software_name=SOFTWARE_NAME,
                                     client_software_version=SOFTWARE_VERSION)
        fut = self.send_nowait(request, self._handshake_version, timeout_s=timeout_s)
        assert fut is not None
        return fut

    async def wait_writable(self) -> None:
        """Wait while the socket's write buffer is above its high-water mark."""
        while self._write_paused and not self._closed:
            fut: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(fut)
            await fut

    @property
    def write_paused(self) -> bool:
        return self._write_paused

    # ------------------------------------------------------------------ closing

    def close(self, reason: BaseException | None = None) -> None:
        """Close now; waiting requests fail with KafkaConnectionError (chained to ``reason``)."""
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._transport is not None:
            self._transport.close()
        self._fail_waiters(reason)
        for fut in self._drain_waiters:
            if not fut.done():
                fut.set_result(None)
        self._drain_waiters.clear()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # a broken owner callback must not stop the others
                log.exception("close callback of connection to %s failed", self.address)

    def _fail_waiters(self, reason: BaseException | None) -> None:
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, {}
        for fut, timer in waiters.values():  # in send order, so owners see failures in order
            if timer is not None:
                timer.cancel()
            if fut.done():
                continue
            if isinstance(reason, KafkaConnectionError):
                fut.set_exception(reason)
            else:
                text = f"connection to {self.address} (node {self.node_id}) closed"
                if reason is not None:
                    text += f": {reason}"
                fut.set_exception(KafkaConnectionError(text, cause=reason))

    # ------------------------------------------------------------------ transport events

    def _on_data(self, data: bytes) -> None:
        try:
            responses = self._framing.feed(data)
        except KafkaError as exc:
            log.warning("closing connection to %s: undecodable response: %s", self.address, exc)
            self.close(exc)
            return
        if self.observer is not None:
            self.observer.received(self, responses, len(data))
        waiters = self._waiters
        for cid, response in responses:
            entry = waiters.pop(cid, None)
            if entry is None:
                continue  # the caller gave up (timeout) and the id was forgotten
            fut, timer = entry
            if timer is not None:
                timer.cancel()
            if not fut.done():  # the awaiting task may have been cancelled
                fut.set_result(response)

    def _on_lost(self, exc: Exception | None) -> None:
        if not self._closed:
            self.close(exc or ConnectionResetError("the broker closed the connection"))

    def _on_resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _on_timeout(self, cid: int, timeout: float) -> None:
        entry = self._waiters.get(cid)
        if entry is None:
            return
        self._framing.forget(cid)
        error = RequestTimeoutError(
            f"no response from {self.address} (node {self.node_id}) within {timeout:g} s"
        )
        log.warning("%s; closing the connection", error)
        self.close(error)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.in_flight} in flight"
        return f"<BrokerConnection node={self.node_id} {self.address} {state}>"
