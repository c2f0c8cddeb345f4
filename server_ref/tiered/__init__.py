"""Tiered storage for the reference broker (KIP-405): closed segments copied to a remote tier
(a directory or an S3-compatible store), reads below the local log start served from there,
retention across both tiers, and the segment metadata in ``__remote_log_metadata``."""

from server_ref.tiered.manager import RemoteLogManager, RemoteRead
from server_ref.tiered.metadata import METADATA_TOPIC, RemoteSegment, SegmentState
from server_ref.tiered.settings import TopicTiering, topic_tiering, validate_topic
from server_ref.tiered.store import RemoteStorageError

__all__ = ["METADATA_TOPIC", "RemoteLogManager", "RemoteRead", "RemoteSegment",
           "RemoteStorageError", "SegmentState", "TopicTiering", "topic_tiering",
           "validate_topic"]
