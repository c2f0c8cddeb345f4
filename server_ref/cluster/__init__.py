"""Cluster mode: our broker as several processes with a controller quorum.

``launcher.py`` (``EmbeddedCluster``, ``python -m server_ref --brokers N``) starts the
processes; ``node.py`` is one node (a controller: Raft voter + ``server_ref.controller``; a
broker: ``Broker`` with a ``ClusterAgent``); ``agent.py`` is a broker's metadata replay,
registration and heartbeats; ``views.py`` and ``forwarding.py`` what brokers answer from
the image or forward to the controller; ``peer.py`` the node-to-node connection.
"""

from server_ref.cluster.launcher import EmbeddedCluster

__all__ = ["EmbeddedCluster"]
