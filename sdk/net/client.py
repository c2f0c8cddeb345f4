"""NetClient: connections to every broker, the metadata cache, request routing and retries.

One NetClient serves one role client (a producer, a consumer, an admin client) and lives on
one event loop. What it offers:

* **Bootstrap and metadata.** :meth:`NetClient.start` begins a background task that keeps
  :attr:`NetClient.metadata` (a :class:`sdk.net.metadata.ClusterMetadata`) fresh: at least
  every ``metadata_max_age_ms``, and soon after :meth:`request_refresh` (call it when a
  response says the metadata is stale), never more often than ``retry_backoff_ms`` apart.
  Refreshes ask for the topics registered with :meth:`add_topics` (or every topic with
  ``metadata_all_topics=True``). Any reachable broker answers; when none of the known brokers
  does, the bootstrap servers are tried again. :meth:`wait_for_topic` blocks until a topic's
  partitions are known; :meth:`refresh_metadata` refreshes now.
* **Connections.** One :class:`sdk.net.connection.BrokerConnection` per node, opened on
  demand (:meth:`connection`, or :meth:`ensure_connecting` which never waits). A failed
  attempt or a broken connection puts the node in reconnect backoff
  (``reconnect_backoff_ms`` doubling up to ``reconnect_backoff_max_ms``); nodes in backoff
  are skipped when any node will do. Bootstrap servers get negative node ids (-1, -2, ...).
* **Routing.** :meth:`send` takes a target: a node id, ``ANY_NODE`` (least loaded),
  ``CONTROLLER``, :class:`Coordinator` (group or transaction coordinator, looked up with
  FindCoordinator and cached; :meth:`forget_coordinator` drops it) or :class:`LeaderOf`
  (a partition's leader).
* **Retries.** :meth:`call` wraps :meth:`send` in a :class:`sdk.net.retry.RetryPolicy`: it
  retries errors marked retriable (lost connections, and whatever the ``check`` callback
  raises for the response's error codes), each attempt resolving its target afresh. Before a
  retry :meth:`forget_stale` applies what the error says is out of date: the metadata after
  ``InvalidMetadataError`` or ``NOT_CONTROLLER`` (so ``CONTROLLER`` then names the new
  controller), the coordinator after ``NOT_COORDINATOR`` / ``COORDINATOR_NOT_AVAILABLE`` or a
  lost connection to it. The admin client's own per-item retries use the same rule.
* **Listeners.** :meth:`add_listener` callbacks run after each metadata update and each
  connection change (the producer's sender uses it to wake up).

Example::

    client = NetClient(CommonConfig.build(bootstrap_servers="127.0.0.1:9092"))
    await client.start()
    info = await client.wait_for_topic("orders", timeout_s=10)
    response = await client.call(ListOffsetsRequest(...), LeaderOf("orders", 0),
                                 check=lambda r: ...)
    await client.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sdk.errors import (
    AuthenticationError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    NotControllerError,
    UnknownTopicOrPartitionError,
    for_code,
)
from sdk.net.connection import BrokerConnection
from sdk.net.metadata import BrokerInfo, ClusterMetadata, TopicInfo
from sdk.net.problems import ProblemReporter
from sdk.net.retry import Backoff, RetryPolicy
from sdk.net.targets import (
    ANY_NODE,
    CONTROLLER,
    Coordinator,
    CoordinatorType,
    LeaderOf,
    NodeRole,
    Target,
)
from sdk.net.topic_problems import FATAL_TOPIC_ERRORS, UNKNOWN_TOPIC, TopicProblems
from sdk.protocol.message import Message
from sdk.protocol.messages.find_coordinator import FindCoordinatorRequest
from sdk.protocol.messages.metadata import MetadataRequest, MetadataResponse

if TYPE_CHECKING:
    from sdk.metrics.network import NetworkObserver
    from sdk.net.config import CommonConfig
    from sdk.net.security import Security

__all__ = [
    "ANY_NODE",
    "CONTROLLER",
    "Coordinator",
    "CoordinatorType",
    "LeaderOf",
    "NetClient",
    "NodeRole",
    "Target",
]

log = logging.getLogger(__name__)

_METADATA_KEY = 3
_METADATA_MIN_VERSION = 1  # v0 reads an empty topic list as "all topics"
_FIND_COORDINATOR_BATCHED = 4  # v4+ asks with coordinator_keys
# A metadata refresh asks the next node too when one has not answered within this long
# (a healthy broker answers in milliseconds; a stopped one never does).
_REFRESH_HEDGE_S = 0.5
_COORDINATOR_ERRORS = (15, 16)  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _retrieve_outcome(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


class NetClient:
    """Connections, metadata and routing for one role client; see the module docstring."""

    def __init__(
        self,
        config: CommonConfig,
        *,
        allow_auto_topic_creation: bool = False,
        metadata_all_topics: bool = False,
        problems: ProblemReporter | None = None,
        observer: NetworkObserver | None = None,
    ) -> None:
        self.config = config
        self.observer = observer  # metrics / hooks / protocol debug of every connection
        # Shared by the NetClients of one role client (the consumer's group connections),
        # so one condition is told once.
        self.problems = problems or ProblemReporter(config.client_id, config.on_error)
        self.metadata = ClusterMetadata()
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata_all_topics = metadata_all_topics
        self._request_timeout_s = config.request_timeout_ms / 1000
        self._connect_timeout_s = config.socket_connection_setup_timeout_ms / 1000
        self._bootstrap = {-(i + 1): addr for i, addr in enumerate(config.bootstrap_servers)}
        self._extra_addresses: dict[int, tuple[str, int]] = {}  # coordinators not in metadata
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._last_error: dict[int, BaseException] = {}
        self._reconnect = Backoff(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms)
        self._refresh_backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._topics: set[str] = set()
        # Missing topics and leaderless partitions: told, and remembered (topic_problems.py).
        self.topic_problems = TopicProblems(self)
        self._coordinators: dict[tuple[str, int], int] = {}
        self._listeners: list[Callable[[], None]] = []
        self._refresh_task: asyncio.Task[ClusterMetadata] | None = None
        self._refresh_wanted: asyncio.Event | None = None
        self._refresh_failures = 0
        self._last_refresh_attempt = 0.0
        self._maintainer: asyncio.Task[None] | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._security: Security | None = None
        if config.security_protocol != "PLAINTEXT":
            from sdk.net.security import Security  # TLS files are read here, once

            self._security = Security.from_config(config)
        # The last authentication failure (TLS or SASL), until a connection succeeds:
        # fatal for the calls that need a broker, which raise it instead of waiting.
        self.auth_error: AuthenticationError | None = None

    # ================================================================== lifecycle

    async def start(self) -> None:
        """Start the metadata upkeep task. Does not wait for any broker to answer."""
        if self._maintainer is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._refresh_wanted = asyncio.Event()
        self._refresh_wanted.set()  # first refresh now
        self._maintainer = self._loop.create_task(self._maintain(), name="kafka-sdk-metadata")

    async def bootstrap(self, timeout_s: float | None = None) -> ClusterMetadata:
        """Start, and wait for the first metadata (NoBrokersAvailableError / timeout)."""
        await self.start()
        return await self.refresh_metadata(timeout_s=timeout_s)

    async def close(self) -> None:
        """Close every connection and stop background work. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        tasks: list[asyncio.Task[Any]] = [t for t in self._connecting.values() if not t.done()]
        if self._maintainer is not None:
            tasks.append(self._maintainer)
        if self._refresh_task is not None and not self._refresh_task.done():
            tasks.append(self._refresh_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def add_listener(self, callback: Callable[[], None]) -> None:
        """``callback()`` runs after metadata updates and connection changes (on the loop)."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("NetClient listener %r failed", callback)

    # ================================================================== metadata

    @property
    def tracked_topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Include ``topics`` in metadata refreshes; asks for a refresh if any is new."""
        new = [t for t in topics if t not in self._topics]
        if new:
            self._topics.update(new)
            self.request_refresh()
        return bool(new)

    def remove_topics(self, topics: Iterable[str]) -> None:
        self._topics.difference_update(topics)

    def request_refresh(self) -> None:
        """Ask the background task for a metadata refresh soon (coalesced, rate-limited)."""
        if self._refresh_wanted is not None:
            self._refresh_wanted.set()

    async def refresh_metadata(self, *, timeout_s: float | None = None) -> ClusterMetadata:
        """Refresh now (joining a refresh already running) and return the metadata.

        Raises NoBrokersAvailableError when no broker answered, KafkaTimeoutError after
        ``timeout_s`` (default: the request timeout).
        """
        self._check_open()
        task = self._refresh_task
        if task is None or task.done():
            task = self._refresh_task = asyncio.get_running_loop().create_task(
                self._refresh_once(), name="kafka-sdk-metadata-refresh"
            )
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            raise KafkaTimeoutError(f"metadata refresh took over {timeout:g} s") from None

    async def wait_for_topic(self, topic: str, timeout_s: float) -> TopicInfo:
        """Wait until ``topic``'s partitions are known (refreshing as needed).

        Raises the topic's error at once when no refresh can cure it (invalid name, not
        authorized) and KafkaTimeoutError, naming the last problem seen, after ``timeout_s``.
        A wait that ended because the cluster says the topic does not exist is remembered:
        while the cluster keeps saying so (see ``sdk.net.topic_problems``), the next waits
        raise UnknownTopicOrPartitionError at once instead of waiting again.
        """
        start = time.monotonic()
        deadline = start + timeout_s
        self.add_topics([topic])
        await self.topic_problems.fail_if_known_missing(topic, deadline)
        attempt = 0
        last_problem: BaseException | None = None
        while True:
            info = self.metadata.topic(topic)
            if info is not None:
                if not info.error_code and info.partition_ids:
                    return info
                if info.error_code in FATAL_TOPIC_ERRORS:
                    raise for_code(info.error_code)(f"topic {topic!r}")
                if info.error_code == UNKNOWN_TOPIC:
                    last_problem = self.topic_problems.missing_topic_error(topic)
                elif info.error_code:
                    last_problem = for_code(info.error_code)(f"topic {topic!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if isinstance(last_problem, UnknownTopicOrPartitionError):
                    self.topic_problems.remember_missing(topic)
                detail = f"; last problem: {last_problem}" if last_problem else ""
                raise KafkaTimeoutError(
                    f"metadata for topic {topic!r} not available after {timeout_s:g} s{detail}",
                    cause=last_problem,
                )
            if attempt:
                await asyncio.sleep(min(self._refresh_backoff.delay(attempt), remaining))
            attempt += 1
            try:
                await self.refresh_metadata(
                    timeout_s=max(0.001, min(deadline - time.monotonic(), self._request_timeout_s))
                )
            except KafkaTimeoutError as exc:
                # The wait's own deadline cut this refresh short: the cause seen before
                # (a refused connection, a missing topic) says more than that.
                if self.auth_error is not None:
                    raise self.auth_error from None
                last_problem = last_problem or exc
            except AuthenticationError:
                raise  # wrong credentials or certificates: waiting will not cure them
            except KafkaError as exc:
                last_problem = exc

    async def refresh_metadata_anew(self, *, timeout_s: float) -> ClusterMetadata:
        """:meth:`refresh_metadata` with a request sent from now on: a refresh already
        running is waited for first, as its request may predate a change (a topic's
        creation). KafkaError or TimeoutError after ``timeout_s`` for each of the two."""
        running = self._refresh_task
        if running is not None and not running.done():
            await asyncio.wait_for(asyncio.shield(running), timeout_s)
        return await self.refresh_metadata(timeout_s=timeout_s)

    async def _refresh_once(self) -> ClusterMetadata:
        """Ask the candidates in turn; the first answer wins.

        A node that fails is followed by the next at once. A node that has not answered
        within ``_REFRESH_HEDGE_S`` is not given up, but the next one is asked as well: a
        stopped broker (SIGSTOP, a long GC pause) accepts connections and answers nothing,
        and waiting out its connect timeout would keep the client on stale leaders."""
        self._last_refresh_attempt = time.monotonic()
        errors: list[str] = []
        candidates = iter(self._refresh_candidates())
        asking: dict[asyncio.Task[tuple[MetadataResponse, bool, list[str]]], int] = {}
        loop = asyncio.get_running_loop()
        try:
            while True:
                node = next(candidates, None)
                if node is not None:
                    asking[loop.create_task(self._ask_metadata(node))] = node
                if not asking:
                    break
                done, _ = await asyncio.wait(
                    asking, timeout=_REFRESH_HEDGE_S if node is not None else None,
                    return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    failed_node = asking.pop(task)
                    try:
                        response, all_topics, requested = task.result()
                    except KafkaError as exc:
                        errors.append(f"node {failed_node}: {exc}")
                        continue
                    self.metadata.apply(response, all_topics=all_topics,
                                        requested=() if all_topics else requested)
                    self._refresh_failures = 0
                    self._forget_gone_nodes()
                    self.topic_problems.check(self._topics)
                    self._notify()
                    return self.metadata
        finally:
            for task in asking:
                # A loser's failure is no news. One cancelled while its failure was
                # already on the way still ends with that failure: retrieve it then.
                task.add_done_callback(_retrieve_outcome)
                task.cancel()
        self._refresh_failures += 1
        if self.auth_error is not None:
            raise self.auth_error
        raise NoBrokersAvailableError(
            "no broker answered a metadata request"
            + (": " + "; ".join(errors) if errors else " (no broker address known)")
        )

    async def _ask_metadata(self, node: int) -> tuple[MetadataResponse, bool, list[str]]:
        """One node's Metadata answer, with whether it lists every topic and which were asked."""
        conn = await self.connection(node, timeout_s=self._connect_timeout_s,
                                     wait_backoff=False)
        version = conn.version_for(_METADATA_KEY, min_version=_METADATA_MIN_VERSION)
        all_topics = self.metadata_all_topics
        requested = sorted(self._topics)
        request = MetadataRequest(
            topics=None if all_topics else [
                MetadataRequest.MetadataRequestTopic(name=t) for t in requested
            ],
            allow_auto_topic_creation=self.allow_auto_topic_creation,
        )
        return await conn.send(request, version), all_topics, requested

    def _refresh_candidates(self) -> list[int]:
        """Connected nodes by load, then known brokers not backing off, then bootstrap
        servers, then whatever is backing off (soonest first)."""
        now = time.monotonic()
        connected = sorted(
            (c for c in self._connections.values() if not c.closed), key=lambda c: c.in_flight
        )
        order = [c.node_id for c in connected]
        brokers = [n for n in self.metadata.brokers if n not in order]
        random.shuffle(brokers)
        bootstrap = [n for n in self._bootstrap if n not in order]
        random.shuffle(bootstrap)
        rest = brokers + bootstrap
        ready = [n for n in rest if self._retry_at.get(n, 0.0) <= now]
        waiting = sorted((n for n in rest if self._retry_at.get(n, 0.0) > now),
                         key=lambda n: self._retry_at[n])
        return order + ready + waiting

    def _forget_gone_nodes(self) -> None:
        known = self.metadata.brokers
        for node, conn in list(self._connections.items()):
            if node >= 0 and node not in known and node not in self._extra_addresses:
                conn.close()
            elif node < 0 and known and conn.in_flight == 0:
                conn.close()  # a bootstrap connection is redundant once brokers are known

    async def _maintain(self) -> None:
        wanted = self._refresh_wanted
        assert wanted is not None
        max_age = self.config.metadata_max_age_ms / 1000
        while not self._closed:
            age_due = self.metadata.updated_at + max_age if self.metadata.updated_at else 0.0
            timeout = max(0.0, age_due - time.monotonic()) if self.metadata.updated_at else 0.0
            if not wanted.is_set() and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wanted.wait(), timeout)
            # Keep refreshes apart: retry_backoff_ms, growing while they fail.
            gap = max(self._refresh_backoff.delay(self._refresh_failures),
                      self.config.retry_backoff_ms / 1000)
            wait = self._last_refresh_attempt + gap - time.monotonic()
            if wait > 0 and self._last_refresh_attempt:
                await asyncio.sleep(wait)
            wanted.clear()
            try:
                await self.refresh_metadata()
            except KafkaError as exc:
                log.info("metadata refresh failed: %s", exc)
                wanted.set()  # try again after the backoff

    # ================================================================== connections

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        broker = self.metadata.brokers.get(node_id)
        if broker is not None:
            return broker.host, broker.port
        return self._extra_addresses.get(node_id) or self._bootstrap.get(node_id)

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The open connection to ``node_id``, or None. Never waits."""
        conn = self._connections.get(node_id)
        return conn if conn is not None and not conn.closed else None

    def backoff_remaining(self, node_id: int) -> float:
        """Seconds until ``node_id`` may be tried again (0 when it may be tried now)."""
        return max(0.0, self._retry_at.get(node_id, 0.0) - time.monotonic())

    def last_error(self, node_id: int) -> BaseException | None:
        """Why the last connection to ``node_id`` failed or closed, if it did."""
        return self._last_error.get(node_id)

    def ensure_connecting(self, node_id: int) -> float:
        """Start connecting to ``node_id`` in the background unless connected, connecting or
        backing off. Returns the backoff seconds left (0 if connected or connecting).

        While the node is connecting or backing off, asks for a metadata refresh: the caller
        wants it because the metadata names it (a partition leader), and only new metadata
        tells that another node took over."""
        self._check_open()
        if self.ready_connection(node_id) is not None:
            return 0.0
        if node_id in self._connecting:
            # Still connecting: a hung broker (stopped, black-holed) accepts the TCP
            # connection and never answers the handshake. Meanwhile the cluster may move
            # its partitions elsewhere: keep the metadata fresh (refreshes are rate-limited).
            self.request_refresh()
            return 0.0
        remaining = self.backoff_remaining(node_id)
        if remaining > 0:
            self.request_refresh()  # same reason: do not wait for the next attempt's outcome
            return remaining
        try:
            task = self._start_connect(node_id)
        except KafkaConnectionError as exc:
            self._record_failure(node_id, exc, connecting=True)
            return self.backoff_remaining(node_id)
        # A background attempt's failure is recorded as backoff; nobody awaits the task.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return 0.0

    async def connection(self, node_id: int, *, timeout_s: float | None = None,
                         wait_backoff: bool = True) -> BrokerConnection:
        """An open connection to ``node_id``: the existing one, or a new one.

        While the node is in reconnect backoff this waits the backoff out if it ends within
        ``timeout_s`` (and ``wait_backoff``), else fails with KafkaConnectionError at once.
        """
        self._check_open()
        conn = self.ready_connection(node_id)
        if conn is not None:
            return conn
        timeout = self._connect_timeout_s if timeout_s is None else timeout_s
        task = self._connecting.get(node_id)
        if task is None:
            remaining = self.backoff_remaining(node_id)
            if remaining > 0:
                if not wait_backoff or remaining >= timeout:
                    last = self._last_error.get(node_id)
                    if isinstance(last, AuthenticationError):
                        raise last
                    # The cause first: "connection to h:p refused (ECONNREFUSED) ...".
                    raise KafkaConnectionError(
                        (f"{last}; " if last is not None else f"node {node_id}: ")
                        + f"next attempt in {remaining:.3f} s (reconnect backoff)",
                        cause=last,
                    )
                await asyncio.sleep(remaining)
                timeout -= remaining
                conn = self.ready_connection(node_id)
                if conn is not None:
                    return conn
                task = self._connecting.get(node_id) or self._start_connect(node_id)
            else:
                task = self._start_connect(node_id)
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(timeout, 0.001))
        except TimeoutError:
            raise KafkaConnectionError(
                f"connecting to node {node_id} took over {timeout:g} s"
            ) from None

    def _start_connect(self, node_id: int) -> asyncio.Task[BrokerConnection]:
        address = self.address_of(node_id)
        if address is None:
            raise KafkaConnectionError(f"no address known for node {node_id}")
        task = asyncio.get_running_loop().create_task(self._connect(node_id, *address), name=f"kafka-sdk-connect-{node_id}")
        self._connecting[node_id] = task
        return task

    async def _connect(self, node_id: int, host: str, port: int) -> BrokerConnection:
        try:
            conn = await BrokerConnection.open(
                host, port, node_id=node_id, client_id=self.config.client_id,
                request_timeout_s=self._request_timeout_s,
                connect_timeout_s=self._connect_timeout_s, security=self._security,
            )
        except KafkaError as exc:
            self._record_failure(node_id, exc, connecting=True)
            raise
        finally:
            self._connecting.pop(node_id, None)
        if self._closed:
            conn.close()
            raise KafkaConnectionError("the client was closed while connecting")
        self._failures.pop(node_id, None)
        self._retry_at.pop(node_id, None)
        self.auth_error = None
        if self.problems.resolved(("connect", f"{host}:{port}")):
            log.info("%s: connected to %s:%s (node %s) again", self.config.client_id,
                        host, port, node_id)
        self._connections[node_id] = conn
        conn.add_close_callback(self._on_connection_closed)
        if self.observer is not None:
            self.observer.attach(conn)
        log.debug("connected to node %s at %s:%s", node_id, host, port)
        self._notify()
        return conn

    def _record_failure(self, node_id: int, exc: BaseException, *,
                        connecting: bool = False) -> None:
        failures = self._failures.get(node_id, 0) + 1
        self._failures[node_id] = failures
        delay = self._reconnect.delay(failures)
        if isinstance(exc, AuthenticationError):
            # Credentials or certificates do not fix themselves: no retry storm (at least
            # reconnect_backoff_max_ms between attempts, as Java), and callers see it.
            delay = max(delay, self.config.reconnect_backoff_max_ms / 1000)
            self.auth_error = exc
        self._retry_at[node_id] = time.monotonic() + delay
        self._last_error[node_id] = exc
        address = self.address_of(node_id)
        if connecting and isinstance(exc, KafkaError) and address is not None:
            # Cannot reach the broker: a WARNING (rate-limited) with the OS's reason. A lost
            # connection alone is not (brokers close idle ones); the reconnect tells.
            self.problems.report(("connect", f"{address[0]}:{address[1]}"), exc)
        log.info("node %s unreachable (%s); retry in %.3f s", node_id, exc,
                 self.backoff_remaining(node_id))
        # An unreachable broker may be a dead leader: only fresh metadata moves its
        # partitions elsewhere, and the controller may name the new leader only seconds
        # later (when it fences the broker), so look again after every failed attempt.
        self.request_refresh()
        self._notify()

    def _on_connection_closed(self, conn: BrokerConnection) -> None:
        if self._connections.get(conn.node_id) is conn:
            del self._connections[conn.node_id]
        if self._closed:
            return
        if conn.close_reason is not None:
            # The broker went away or stopped answering: back off, and look for new leaders.
            self._record_failure(conn.node_id, conn.close_reason)
        else:
            self._notify()

    def least_loaded_node(self) -> int | None:
        """A connected node with the fewest requests in flight; else a node that may be
        tried now (known brokers before bootstrap servers); None if all are backing off."""
        best: BrokerConnection | None = None
        for conn in self._connections.values():
            if conn.closed or (conn.node_id < 0 and self.metadata.brokers):
                continue
            if best is None or conn.in_flight < best.in_flight:
                best = conn
        if best is not None:
            return best.node_id
        now = time.monotonic()
        for pool in (list(self.metadata.brokers), list(self._bootstrap)):
            random.shuffle(pool)
            for node in pool:
                if self._retry_at.get(node, 0.0) <= now:
                    return node
        return None

    # ================================================================== requests

    async def send(
        self,
        request: Message,
        target: Target = ANY_NODE,
        *,
        version: int | None = None,
        max_version: int | None = None,
        expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one request to ``target`` and await its response; no retries.

        ``version`` pins the version; otherwise the highest common one (at most
        ``max_version``). Errors: KafkaConnectionError (retriable), UnsupportedVersionError,
        NoBrokersAvailableError, KafkaTimeoutError.
        """
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        node = await self.resolve(target, timeout_s=timeout)
        conn = await self.connection(node, timeout_s=max(0.001, deadline - time.monotonic()))
        if version is None:
            version = conn.version_for(request.API_KEY, max_version=max_version)
        return await conn.send(request, version, expect_response=expect_response,
                               timeout_s=max(0.001, deadline - time.monotonic()))

    async def call(
        self,
        request: Message | Callable[[int], Message],
        target: Target = ANY_NODE,
        *,
        check: Callable[[Any], None] | None = None,
        timeout_s: float | None = None,
        max_attempts: int | None = None,
        max_version: int | None = None,
    ) -> Any:
        """:meth:`send` with retries (see the module docstring).

        ``request`` is a message, or a function ``version -> message`` for requests whose
        content depends on the negotiated version. ``check(response)`` raises the error a
        response carries (e.g. ``raise_for_code``); retriable ones are retried.
        ``timeout_s`` bounds the whole call (default: the request timeout).
        """
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        policy = RetryPolicy(backoff_ms=self.config.retry_backoff_ms,
                             backoff_max_ms=self.config.retry_backoff_max_ms,
                             timeout_s=timeout, max_attempts=max_attempts)

        async def attempt() -> Any:
            node = await self.resolve(target, timeout_s=timeout)
            conn = await self.connection(node, timeout_s=timeout)
            if isinstance(request, Message):
                msg = request
                version = conn.version_for(msg.API_KEY, max_version=max_version)
            else:
                probe = request(0)
                version = conn.version_for(probe.API_KEY, max_version=max_version)
                msg = request(version)
            response = await conn.send(msg, version)
            if check is not None:
                check(response)
            return response

        async def before_retry(exc: BaseException) -> None:
            if self.forget_stale(target, exc):
                with contextlib.suppress(KafkaError):
                    await self.refresh_metadata()

        name = type(request).__name__ if isinstance(request, Message) else "request"
        return await policy.run(attempt, before_retry=before_retry, what=name)

    def forget_stale(self, target: Target | None, exc: BaseException) -> bool:
        """Act on what a failed request to ``target`` says is out of date, before a retry.

        Forgets the coordinator of a :class:`Coordinator` target after NOT_COORDINATOR,
        COORDINATOR_NOT_AVAILABLE or a lost connection. Returns whether the metadata must
        be refreshed first: after an ``InvalidMetadataError`` (stale leaders, lost
        brokers), and after NOT_CONTROLLER, since the request went to a broker that is no
        longer the controller and ``CONTROLLER`` resolves from the metadata.
        """
        if isinstance(target, Coordinator) and (
            getattr(exc, "errno", None) in _COORDINATOR_ERRORS
            or isinstance(exc, KafkaConnectionError)
        ):
            self.forget_coordinator(target.key, target.key_type)
        return isinstance(exc, InvalidMetadataError | NotControllerError)

    async def resolve(self, target: Target, *, timeout_s: float | None = None) -> int:
        """The node id a target means right now (looking up leaders/coordinators)."""
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        if isinstance(target, int):
            if self.address_of(target) is None:
                await self.refresh_metadata(timeout_s=timeout)
                if self.address_of(target) is None:
                    raise KafkaConnectionError(f"node {target} is not in the cluster metadata")
            return target
        if target is NodeRole.ANY:
            node = self.least_loaded_node()
            if node is None:
                pending = [self.backoff_remaining(n) for n in
                           list(self.metadata.brokers) + list(self._bootstrap)]
                wait = min(pending, default=0.0)
                if wait >= timeout:
                    raise NoBrokersAvailableError("every known broker is in reconnect backoff")
                await asyncio.sleep(wait)
                node = self.least_loaded_node()
                if node is None:
                    raise NoBrokersAvailableError("every known broker is in reconnect backoff")
            return node
        if target is NodeRole.CONTROLLER:
            if self.metadata.controller_id < 0:
                await self.refresh_metadata(timeout_s=timeout)
            if self.metadata.controller_id < 0:
                raise NoBrokersAvailableError("the cluster reports no controller")
            return self.metadata.controller_id
        if isinstance(target, Coordinator):
            return await self.find_coordinator(target.key, target.key_type, timeout_s=timeout)
        if isinstance(target, LeaderOf):
            leader = self.metadata.leader_for(target.topic, target.partition)
            if leader is None:
                self.add_topics([target.topic])
                await self.wait_for_topic(target.topic, timeout)
                leader = self.metadata.leader_for(target.topic, target.partition)
            if leader is None:
                raise LeaderNotAvailableError(f"{target.topic}-{target.partition} has no leader")
            return leader
        raise TypeError(f"not a request target: {target!r}")

    # ================================================================== coordinators

    async def find_coordinator(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP,
                               *, timeout_s: float | None = None) -> int:
        """Node id of the coordinator for a group / transactional id (cached)."""
        cached = self._coordinators.get((key, int(key_type)))
        if cached is not None:
            return cached

        def build(version: int) -> FindCoordinatorRequest:
            if version >= _FIND_COORDINATOR_BATCHED:
                return FindCoordinatorRequest(key_type=int(key_type), coordinator_keys=[key])
            return FindCoordinatorRequest(key=key, key_type=int(key_type))

        found: list[BrokerInfo] = []

        def check(response: Any) -> None:
            if response.coordinators:
                c = response.coordinators[0]
                code, node, host, port, msg = c.error_code, c.node_id, c.host, c.port, c.error_message
            else:
                code, node, host, port, msg = (response.error_code, response.node_id,
                                               response.host, response.port,
                                               response.error_message)
            if code:
                raise for_code(code)(f"coordinator for {key!r}: {msg or ''}".strip())
            found[:] = [BrokerInfo(node, host, port)]

        await self.call(build, ANY_NODE, check=check, timeout_s=timeout_s)
        info = found[0]
        if info.node_id not in self.metadata.brokers:
            self._extra_addresses[info.node_id] = (info.host, info.port)
        self._coordinators[(key, int(key_type))] = info.node_id
        return info.node_id

    def forget_coordinator(self, key: str,
                           key_type: CoordinatorType = CoordinatorType.GROUP) -> None:
        self._coordinators.pop((key, int(key_type)), None)

    # ================================================================== helpers

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaConnectionError("the network client is closed")

    def __repr__(self) -> str:
        return (f"<NetClient {len(self._connections)} connections, "
                f"{len(self.metadata.brokers)} brokers, {len(self.metadata.topics)} topics>")

