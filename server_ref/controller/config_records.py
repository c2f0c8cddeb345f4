"""Dynamic broker configs in the metadata log (cluster mode).

As in Kafka's KRaft mode, IncrementalAlterConfigs and AlterConfigs on BROKER resources are
forwarded to the active controller: ``""`` (the cluster-wide default, every broker) or a
broker id (that broker only; any id, as Kafka's controller takes it). The controller runs
the single broker's checks (``server_ref.handlers.configs.check_broker_update``: Kafka's
table of what is dynamic, per-broker only, its validators) on its image and writes the
whole level after the change as one ``broker_configs`` record (Kafka writes a ConfigRecord
per key). Each broker replays the levels that concern it into its ``BrokerConfig``
(``apply_broker_configs``), so DescribeConfigs shows them as DYNAMIC_BROKER_CONFIG /
DYNAMIC_DEFAULT_BROKER_CONFIG, and they come back after a restart from the log or its
snapshot. BROKER_LOGGER resources are not served (INVALID_REQUEST, as a single broker).
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from sdk.errors import InvalidConfigError, InvalidRequestError

if TYPE_CHECKING:
    from server_ref.broker import Broker
    from server_ref.config import BrokerConfig
    from server_ref.controller.image import MetadataImage

log = logging.getLogger(__name__)

__all__ = ["apply_broker_configs", "broker_config_record"]


def _resource(name: str) -> bool:
    """Whether ``name`` is a broker id (True) or the cluster default "" (False)."""
    if name == "":
        return False
    try:
        int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    return True


def broker_config_record(image: MetadataImage, config: BrokerConfig, name: str,
                         ops: list[Any]) -> dict[str, Any]:
    """The ``broker_configs`` record IncrementalAlterConfigs ``ops`` on the BROKER resource
    ``name`` makes, checked as a broker checks it (InvalidRequestError /
    InvalidConfigError otherwise). ``config`` is the controller's own (static) config: the
    dynamic levels come from the image."""
    from server_ref.handlers.configs import _incremental_broker, check_broker_update

    per_broker = _resource(name)
    keys = [op.name for op in ops]
    if len(keys) != len(set(keys)):
        raise InvalidRequestError("Error due to duplicate config keys")
    view = copy.copy(config)  # the levels as the named broker holds them after replay
    view.dynamic_default = dict(image.broker_configs.get("", {}))
    view.dynamic_broker = dict(image.broker_configs.get(name, {})) if per_broker else {}
    values = _incremental_broker(view, per_broker, ops)
    check_broker_update(view, values, per_broker)
    level = dict(image.broker_configs.get(name, {}))
    for key, value in values.items():
        if value is None:
            level.pop(key, None)
        else:
            level[key] = value
    return {"type": "broker_configs", "resource": name, "configs": level}


def apply_broker_configs(image: MetadataImage, broker: Broker) -> None:
    """Make ``broker``'s dynamic levels what the image holds: the cluster default and its
    own id's level."""
    config = broker.config
    levels = ((config.dynamic_default, image.broker_configs.get("", {}), True),
              (config.dynamic_broker, image.broker_configs.get(str(broker.node_id), {}),
               False))
    changed = False
    for held, wanted, cluster_default in levels:
        for key in sorted(set(held) | set(wanted)):
            if held.get(key) == wanted.get(key):
                continue
            changed = True
            try:
                config.alter(key, wanted.get(key), cluster_default=cluster_default)
            except InvalidConfigError as exc:  # checked by the controller; kept out here
                log.warning("dynamic broker config %s=%s not applied: %s", key,
                            wanted.get(key), exc)
    if changed:
        broker.topics.apply_broker_defaults()
