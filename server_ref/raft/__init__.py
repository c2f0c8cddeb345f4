"""KRaft-style Raft quorum for ``__cluster_metadata`` (see ``api.py`` for the public face)."""
