"""The admin client: topics, configs, consumer groups, offsets, records, leaders and
replicas, the cluster.

``AsyncAdminClient`` is the asyncio core, ``AdminClient`` its blocking face::

    from sdk import AdminClient, NewTopic
    with AdminClient(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("orders", num_partitions=6)]).raise_if_failed()
        print(admin.describe_topics(["orders"])["orders"].partitions)

Modules: ``client.py`` (AsyncAdminClient), ``sync.py`` (AdminClient), ``results.py`` (typed
results with an error per item), ``dispatch.py`` (routing and per-item retries), and one
module per family: ``topics.py``, ``configs.py``, ``groups.py``, ``offsets.py``,
``partitions.py`` (leader elections, replica reassignments), ``acls.py`` (ACLs and SCRAM
users, types in ``acl_types.py``).
"""

import importlib
from typing import TYPE_CHECKING, Any

from sdk.admin.client import AsyncAdminClient
from sdk.admin.sync import AdminClient
from sdk.types import NewTopic, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from sdk.admin.acl_types import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AclResult,
        DeletedAcls,
        PatternType,
        ResourcePattern,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentials,
        UserScramCredentialUpsertion,
        UserScramResult,
    )
    from sdk.admin.config import AdminConfig
    from sdk.admin.configs import ConfigChanges
    from sdk.admin.groups import ConsumerProtocolGroup, ConsumerProtocolMember
    from sdk.admin.results import (
        AlterConfigOp,
        AlterConfigOpType,
        BrokerNode,
        ClusterDescription,
        CommittedOffset,
        ConfigEntry,
        ConfigResource,
        ConfigResourceResult,
        ConfigResourceType,
        ConfigSource,
        ConfigSynonym,
        ConfigType,
        CreateTopicResult,
        DeletedRecords,
        ElectionResult,
        ElectionType,
        GroupDescription,
        GroupLag,
        GroupListing,
        GroupResult,
        ItemsFailedError,
        ListedOffset,
        MemberDescription,
        OffsetSpec,
        PartitionDescription,
        PartitionLag,
        PartitionReassignment,
        ReassignmentResult,
        ResourceConfig,
        ResultSet,
        TopicDescription,
        TopicListing,
        TopicResult,
    )
    from sdk.admin.topics import NewPartitions
    from sdk.admin.transactions import (
        AbortTransactionResult,
        PartitionProducers,
        ProducerState,
        TransactionDescription,
        TransactionListing,
    )

__all__ = [
    "AbortTransactionResult",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResult",
    "AdminClient",
    "AdminConfig",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdminClient",
    "BrokerNode",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigChanges",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceResult",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "CreateTopicResult",
    "DeletedAcls",
    "DeletedRecords",
    "ElectionResult",
    "ElectionType",
    "ConsumerProtocolGroup",
    "ConsumerProtocolMember",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "GroupResult",
    "ItemsFailedError",
    "ListedOffset",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionLag",
    "PartitionProducers",
    "PartitionReassignment",
    "PatternType",
    "ProducerState",
    "ReassignmentResult",
    "ResourceConfig",
    "ResourcePattern",
    "ResourceType",
    "ResultSet",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TopicDescription",
    "TopicListing",
    "TopicPartition",
    "TopicResult",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentials",
    "UserScramResult",
]


# Loaded on first use, so importing the clients pays for neither pydantic (the settings
# model) nor the result dataclasses: where each public name that is not imported above lives.
_LAZY = {"AdminConfig": "sdk.admin.config", "ConfigChanges": "sdk.admin.configs",
         "NewPartitions": "sdk.admin.topics",
         "ConsumerProtocolGroup": "sdk.admin.groups", "ConsumerProtocolMember": "sdk.admin.groups",
         **dict.fromkeys(("AbortTransactionResult", "PartitionProducers", "ProducerState",
                          "TransactionDescription", "TransactionListing"),
                         "sdk.admin.transactions"),
         **dict.fromkeys(("AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType",
                          "AclResult", "DeletedAcls", "PatternType", "ResourcePattern",
                          "ResourceType", "ScramCredentialInfo", "ScramMechanism",
                          "UserScramCredentialDeletion", "UserScramCredentialUpsertion",
                          "UserScramCredentials", "UserScramResult"), "sdk.admin.acl_types")}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name, "sdk.admin.results" if name in __all__ else None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
