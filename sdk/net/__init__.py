"""The network layer shared by the producer, consumer and admin client.

Layers (each module's docstring has the details)::

    config.py       CommonConfig: bootstrap servers, client id, timeouts, backoffs, metadata
                    age; CommonConfig.build() for kwargs / dotted-name mappings (ConfigError)
    connection.py   BrokerConnection: one socket, ApiVersions handshake, pipelined requests
                    matched by correlation id, request timeouts, close callbacks
    metadata.py     ClusterMetadata: brokers, topics, leaders, controller (pure state)
    client.py       NetClient: connections per node with reconnect backoff, metadata upkeep,
                    routing (node id, ANY_NODE, CONTROLLER, Coordinator, LeaderOf), call()
                    with retries, listeners
    retry.py        Backoff and RetryPolicy (tenacity)
    loop_thread.py  LoopThread: the event loop thread the blocking faces run their core on

Role packages import from here, never from each other. Everything except LoopThread runs on
one asyncio event loop and is not thread-safe.
"""

from typing import TYPE_CHECKING, Any

from sdk.errors import RequestTimeoutError  # re-exported: it was defined in sdk.net.connection
from sdk.net.client import (
    ANY_NODE,
    CONTROLLER,
    Coordinator,
    CoordinatorType,
    LeaderOf,
    NetClient,
    NodeRole,
    Target,
)
from sdk.net.connection import BrokerConnection
from sdk.net.loop_thread import LoopThread
from sdk.net.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from sdk.net.retry import Backoff, RetryPolicy

if TYPE_CHECKING:
    from sdk.net.config import CommonConfig, NonNegativeInt, PositiveInt, parse_bootstrap_servers

__all__ = [
    "ANY_NODE",
    "CONTROLLER",
    "Backoff",
    "BrokerConnection",
    "BrokerInfo",
    "ClusterMetadata",
    "CommonConfig",
    "Coordinator",
    "CoordinatorType",
    "LeaderOf",
    "LoopThread",
    "NetClient",
    "NodeRole",
    "NonNegativeInt",
    "PartitionInfo",
    "PositiveInt",
    "RequestTimeoutError",
    "RetryPolicy",
    "Target",
    "TopicInfo",
    "parse_bootstrap_servers",
]

_CONFIG_NAMES = ("CommonConfig", "NonNegativeInt", "PositiveInt", "parse_bootstrap_servers")


def __getattr__(name: str) -> Any:
    # sdk.net.config (pydantic) loads on first use: importing the clients does not pay for it.
    if name in _CONFIG_NAMES:
        from sdk.net import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
