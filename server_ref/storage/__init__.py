"""The reference broker's storage engine: partition logs on disk, laid out as Kafka's.

``PartitionLog.open(directory, LogConfig(...))`` creates or recovers a partition directory of
``<20-digit base offset>.log`` segments with sparse ``.index`` and ``.timeindex`` files.
"""

from server_ref.storage.cleaner import CompactionStats
from server_ref.storage.config import LogConfig
from server_ref.storage.epochs import LeaderEpochCache
from server_ref.storage.log import PartitionLog
from server_ref.storage.recovery import RecoveryReport
from server_ref.storage.results import AppendInfo, BatchHeader, ReadSlice
from server_ref.storage.transactions import AbortedTxn

__all__ = [
    "AbortedTxn",
    "AppendInfo",
    "BatchHeader",
    "CompactionStats",
    "LeaderEpochCache",
    "LogConfig",
    "PartitionLog",
    "ReadSlice",
    "RecoveryReport",
]
