"""Share groups (KIP-932): ``ShareConsumer`` / ``AsyncShareConsumer`` and ``AcknowledgeType``.

Kafka as a queue: members of one share group read the same partitions, each record is
acquired by one member at a time, acknowledged (ACCEPT, RELEASE, REJECT), and delivered
again when released or when its acquisition lock times out. At least once, no order per
partition. Files: ``consumer.py`` (the async core), ``sync.py`` (the blocking face),
``membership.py`` (ShareGroupHeartbeat), ``session.py`` (share sessions),
``acknowledgements.py`` (what is owed to the broker), ``config.py``.
"""

from __future__ import annotations

from sdk.share.acknowledgements import AcknowledgeType
from sdk.share.consumer import AcknowledgementCommitCallback, AsyncShareConsumer
from sdk.share.sync import ShareConsumer
from sdk.types import ShareConsumerRecord

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "AsyncShareConsumer",
           "ShareConsumer", "ShareConsumerRecord"]
