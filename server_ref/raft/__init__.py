"""KRaft-style Raft quorum for ``__cluster_metadata`` (see ``api.py`` for the public face).

``RaftNode`` loads on first use: a broker that only imports the API types (or nothing of
the quorum, in single-node mode) does not pay for the node, its log and its listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server_ref.raft.node import RaftNode

__all__ = ["RaftNode"]


def __getattr__(name: str) -> Any:
    if name == "RaftNode":
        from server_ref.raft.node import RaftNode

        return RaftNode
    raise AttributeError(f"module 'server_ref.raft' has no attribute {name!r}")
