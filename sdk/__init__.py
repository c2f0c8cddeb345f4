"""kafka-sdk: a Python client for Apache Kafka.

The public names load on first use, so ``import sdk`` stays cheap: a script that only needs
the types does not pay for asyncio, pydantic or the protocol modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Producer": "sdk.producer",
    "AsyncProducer": "sdk.producer",
    "Consumer": "sdk.consumer",
    "AsyncConsumer": "sdk.consumer",
    "ConsumerGroupMetadata": "sdk.consumer",
    "ShareConsumer": "sdk.share",
    "AsyncShareConsumer": "sdk.share",
    "AcknowledgeType": "sdk.share",
    "ShareConsumerRecord": "sdk.types",
    "AdminClient": "sdk.admin",
    "AsyncAdminClient": "sdk.admin",
    "ConfigResource": "sdk.admin",
    "OffsetSpec": "sdk.admin",
    "AlterConfigOp": "sdk.admin",
    "NewPartitions": "sdk.admin",
    "ElectionType": "sdk.admin",
    "AclBinding": "sdk.admin",
    "AclBindingFilter": "sdk.admin",
    "AclOperation": "sdk.admin",
    "AclPermissionType": "sdk.admin",
    "PatternType": "sdk.admin",
    "ResourcePattern": "sdk.admin",
    "ResourceType": "sdk.admin",
    "ScramMechanism": "sdk.admin",
    "UserScramCredentialDeletion": "sdk.admin",
    "UserScramCredentialUpsertion": "sdk.admin",
    "TopicPartition": "sdk.types",
    "RecordMetadata": "sdk.types",
    "ConsumerRecord": "sdk.types",
    "NewTopic": "sdk.types",
    "OffsetAndMetadata": "sdk.types",
    "OffsetAndTimestamp": "sdk.types",
    "TimestampType": "sdk.types",
    "OAuthBearerToken": "sdk.net.security",
}

__all__ = [
    "AcknowledgeType",
    "AsyncShareConsumer",
    "ShareConsumer",
    "ShareConsumerRecord",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "ScramMechanism",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "AdminClient",
    "AlterConfigOp",
    "ConfigResource",
    "ElectionType",
    "NewPartitions",
    "OffsetSpec",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncProducer",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NewTopic",
    "OAuthBearerToken",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TimestampType",
    "TopicPartition",
    "errors",
]

if TYPE_CHECKING:
    from sdk import errors
    from sdk.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOp,
        AsyncAdminClient,
        ConfigResource,
        ElectionType,
        NewPartitions,
        OffsetSpec,
        PatternType,
        ResourcePattern,
        ResourceType,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    from sdk.consumer import AsyncConsumer, Consumer, ConsumerGroupMetadata
    from sdk.net.security import OAuthBearerToken
    from sdk.producer import AsyncProducer, Producer
    from sdk.share import AcknowledgeType, AsyncShareConsumer, ShareConsumer
    from sdk.types import (
        ConsumerRecord,
        NewTopic,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        RecordMetadata,
        ShareConsumerRecord,
        TimestampType,
        TopicPartition,
    )


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("sdk.errors")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
