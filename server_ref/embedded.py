"""EmbeddedBroker: a reference broker on a background thread, for tests and examples.

    with EmbeddedBroker(port=0) as b:
        producer = Producer(bootstrap_servers=b.bootstrap_servers)
        b.control.fail_next(ApiKey.PRODUCE, errors.NotLeaderOrFollowerError.errno)
        b.restart()                      # same data, same port

The broker's state lives on the thread's event loop; use ``call`` to run a function there
(for example to inspect a partition log) instead of touching it from the test thread.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from sdk.errors import ConfigError, IllegalStateError
from server_ref.broker import Broker
from server_ref.config import BrokerConfig
from server_ref.control import ControlSurface
from server_ref.server import KafkaServer, start_broker, stop_broker

__all__ = ["EmbeddedBroker"]

T = TypeVar("T")
START_TIMEOUT_S = 60.0


class EmbeddedBroker:
    def __init__(self, data_dir: str | Path | None = None, port: int = 0, *,
                 host: str = "127.0.0.1", brokers: int = 1,
                 config: Mapping[str, Any] | None = None, fsync: bool = False,
                 zero_copy: bool = True, metrics_port: int | None = None,
                 **properties: Any) -> None:
        """``config`` takes Kafka-named broker properties (``{"num.partitions": 3}``);
        keyword ``properties`` the same with underscores (``num_partitions=3``).
        ``metrics_port`` serves Prometheus metrics at ``metrics_url`` (0: a free port)."""
        if brokers != 1:
            raise ConfigError("EmbeddedBroker runs one broker in this process; for a cluster "
                              "use server_ref.EmbeddedCluster(brokers=N) (one process per "
                              "node)", key="brokers", value=brokers, allowed=[1])
        merged = dict(config or {})
        merged.update({key.replace("_", "."): value for key, value in properties.items()})
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(
            tempfile.mkdtemp(prefix="server_ref-"))
        self.host = host
        self.port = port
        self.metrics_port = metrics_port  # the bound port once started
        self.config = BrokerConfig(host=host, port=port, data_dir=self.data_dir, fsync=fsync,
                                   zero_copy=zero_copy, properties=merged)
        self.control = ControlSurface()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Broker | None = None
        self._server: KafkaServer | None = None
        self._listener_ports: dict[str, int] = {}  # bound ports: a restart binds them again

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EmbeddedBroker:
        if self._broker is not None:
            raise IllegalStateError("the embedded broker is already running")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever,
                                            name="server_ref-embedded", daemon=True)
            self._thread.start()
        broker = Broker(self.config, self.data_dir)
        broker.control = self.control

        async def boot() -> KafkaServer:
            return await start_broker(broker, self.host, self.port, self._listener_ports,
                                      self.metrics_port)

        try:
            self._server = self._run(boot(), START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        self._broker = broker
        assert self._server is not None
        self._listener_ports = dict(self._server.ports)
        self.port = broker.port
        self.config.port = broker.port  # a restart binds the same port again
        if broker.metrics is not None and broker.metrics.endpoint is not None:
            self.metrics_port = broker.metrics.endpoint.port
        return self

    def stop(self) -> None:
        """Stop serving and close the logs cleanly (the data stays for ``start``)."""
        broker, server = self._broker, self._server
        if broker is None or server is None:
            return
        self._broker = self._server = None
        self._run(stop_broker(broker, server), START_TIMEOUT_S)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=START_TIMEOUT_S)
            self._loop.close()
            self._loop = None
            self._thread = None
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ access

    @property
    def running(self) -> bool:
        return self._broker is not None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def broker(self) -> Broker:
        """The live Broker; touch its state only through ``call``."""
        if self._broker is None:
            raise IllegalStateError("the embedded broker is not running")
        return self._broker

    @property
    def metrics_url(self) -> str:
        """Where Prometheus scrapes this broker (``metrics_port`` given)."""
        if self.metrics_port is None:
            raise IllegalStateError("the embedded broker has no metrics_port")
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def listener_ports(self) -> dict[str, int]:
        """The bound port of each listener, by Kafka's upper-case listener name."""
        if self._server is None:
            raise IllegalStateError("the embedded broker is not running")
        return dict(self._server.ports)

    def listener_address(self, name: str) -> str:
        """``host:port`` to reach one listener (``listener_address("SASL_SSL")``): its bind
        address, or ``host`` for a listener on every interface."""
        port = self.listener_ports.get(name.upper())
        if port is None:
            raise ConfigError(f"no listener named {name}", key="listeners", value=name,
                              allowed=sorted(self.listener_ports))
        assert self._server is not None
        bound = self._server.hosts.get(name.upper()) or ""
        return f"{bound if bound not in ('', '0.0.0.0', '::') else self.host}:{port}"

    @property
    def security_stats(self) -> dict[str, int]:
        """Counts of authentications, re-authentications, failures, sessions closed on
        expiry and connections closed before authenticating in time."""
        if self._server is None:
            raise IllegalStateError("the embedded broker is not running")
        return dict(self._server.security_stats)

    def connection_principals(self) -> list[tuple[str, str]]:
        """(listener, principal) of each open client connection."""
        server = self._server
        if server is None:
            raise IllegalStateError("the embedded broker is not running")
        return self.call(lambda: sorted((c.listener_name, c.principal)
                                        for c in server.connections if not c.closed))

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
        """Run ``fn(*args)`` on the broker's loop and return its result."""
        async def run() -> T:
            return fn(*args)

        return self._run(run(), timeout)

    def _run(self, coro: Any, timeout: float) -> Any:
        if self._loop is None:
            coro.close()
            raise IllegalStateError("the embedded broker's loop is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)
