"""Group configs (the GROUP config resource, KIP-848/KIP-932) in the metadata log.

A share group's delivery state lives on each topic partition's leader and its membership
with its group coordinator, so its configs (``share.record.lock.duration.ms``,
``share.auto.offset.reset``, ...) must hold on every broker, not only on the one an admin
client happened to send the change to. As in Kafka, whose brokers forward GROUP config
changes to the controller and replay them as ConfigRecords, IncrementalAlterConfigs on a
GROUP resource is forwarded to the active controller, which runs a broker's checks
(``server_ref.share.group_configs``: names, types, Kafka's ``group.*`` bounds from its own
static config, as every node has the same) and writes the group's whole level after the
change as one ``group_configs`` record (an empty level removes the group). Every broker
replays the levels into its ``GroupConfigStore`` (``apply_group_configs``), which its share
coordinator and share-partitions read; DescribeConfigs answers from it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from sdk.errors import InvalidRequestError

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.config import BrokerConfig
    from server_ref.controller.image import MetadataImage

__all__ = ["apply_group_configs", "group_config_record"]


def group_config_record(image: MetadataImage, config: BrokerConfig, group_id: str,
                        ops: list[Any]) -> dict[str, Any]:
    """The ``group_configs`` record IncrementalAlterConfigs ``ops`` on group ``group_id``
    makes (InvalidRequestError / InvalidConfigError as a broker answers them)."""
    from server_ref.share.group_configs import GroupConfigStore, alter_incrementally

    names = [op.name for op in ops]
    if len(names) != len(set(names)):
        raise InvalidRequestError("Error due to duplicate config keys")
    store = GroupConfigStore(None, config)  # in memory: the image's levels
    store.overrides = copy.deepcopy(image.group_configs)
    alter_incrementally(store, group_id, ops, validate_only=False)
    return {"type": "group_configs", "group": group_id,
            "configs": store.overrides.get(group_id, {})}


def apply_group_configs(image: MetadataImage, broker: Broker) -> None:
    """Make ``broker``'s group config overrides what the image holds."""
    from server_ref.share.coordinator import ShareCoordinator

    ShareCoordinator.of(broker).configs.overrides = copy.deepcopy(image.group_configs)
