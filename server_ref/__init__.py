"""A Kafka-protocol reference broker in Python.

``python -m server_ref --port 9092 --data-dir DIR`` runs one; ``EmbeddedBroker`` runs one on a
background thread of the current process. ``python -m server_ref --brokers 3`` and
``EmbeddedCluster(brokers=3, controllers=1)`` run a cluster, one process per node
(``server_ref.cluster``). See broker.py for what a broker holds and
server.py for how it serves.
"""

from server_ref.broker import Broker
from server_ref.cluster.launcher import EmbeddedCluster
from server_ref.config import BrokerConfig
from server_ref.control import ControlSurface
from server_ref.embedded import EmbeddedBroker

__all__ = ["Broker", "BrokerConfig", "ControlSurface", "EmbeddedBroker", "EmbeddedCluster"]
