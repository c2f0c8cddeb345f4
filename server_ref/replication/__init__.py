"""Partition replication in cluster mode.

``state.py`` one partition's replica state (leader: follower progress, high watermark, ISR),
``manager.py`` roles from the metadata image, ISR changes through AlterPartition,
``fetcher.py`` follower fetchers (truncation by OffsetForLeaderEpoch, then Fetch),
``produce_path.py`` acks=all and min.insync.replicas, ``reads.py`` leader-only reads.
"""
