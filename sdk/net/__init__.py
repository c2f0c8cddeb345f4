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
from sdk.net.config import CommonConfig, NonNegativeInt, PositiveInt, parse_bootstrap_servers
from sdk.net.connection import BrokerConnection
from sdk.net.loop_thread import LoopThread
from sdk.net.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from sdk.net.retry import Backoff, RetryPolicy

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
