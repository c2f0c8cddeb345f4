"""Broker configs as Apache Kafka knows them: what AlterConfigs accepts on a BROKER resource,
what it refuses (with Kafka's codes and messages) and what DescribeConfigs lists.

The facts come from Kafka itself: ``apache_broker_configs.tsv`` (written by
``tools/apache_broker_configs.py``) lists each of its broker configs with its type, default
as DescribeConfigs shows it, validator and update mode: ``read-only`` (static: refused at
run time), ``per-broker`` (only on a named broker) or ``cluster-wide`` (also as the cluster
default, the resource named ""). ``server_ref.config.BROKER_CONFIGS`` holds the configs this
broker acts on; the others are accepted, stored and described, and have no effect here.

Kafka's rules for a change on a broker resource, in its order, all INVALID_REQUEST: a SET
needs a value; static configs cannot change ("Cannot update these configs dynamically");
SSL keystore and truststore settings only with a ``listener.name.<listener>.`` prefix; each
value must parse as its type and pass its validator; per-broker configs (and prefixed
listener settings) are refused at the cluster-default level. Names Kafka does not know are
custom configs: accepted, stored, described with no value (as Kafka treats them as
possibly sensitive).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from sdk.errors import InvalidRequestError

__all__ = ["CONFIG_TYPES", "SYNONYMS", "THREAD_POOL_CONFIGS", "KafkaBrokerConfig", "catalogue",
           "check_value", "listener_base", "validate_broker_update"]

TABLE = Path(__file__).with_name("apache_broker_configs.tsv")

# DescribeConfigs v3+ config_type numbers of Kafka's ConfigDef types.
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
                "LIST": 7, "CLASS": 8, "PASSWORD": 9}
_INT_RANGES = {"INT": 31, "SHORT": 15, "LONG": 63}

# Kafka's synonyms of a broker config (lowest precedence last), shown by DescribeConfigs.
SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
# Thread pools Kafka resizes at run time (DynamicThreadPool): at most x2 or /2 per change.
THREAD_POOL_CONFIGS = {"num.io.threads", "num.network.threads", "num.replica.fetchers",
                       "num.recovery.threads.per.data.dir", "background.threads"}
# Listener settings that stay cluster-wide even with a listener prefix.
_CLUSTER_LEVEL_LISTENER_CONFIGS = {"max.connections", "max.connection.creation.rate",
                                   "num.network.threads"}
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")
_AT_LEAST = re.compile(r"\[(-?[0-9.E]+),\.\.\.\]")
_BETWEEN = re.compile(r"\[(-?[0-9.E]+),\.\.\.,(-?[0-9.E]+)\]( or (-?[0-9.E]+))?")
_CHOICES = re.compile(r"\[([^\]]*)\]")


@dataclass(frozen=True, slots=True)
class KafkaBrokerConfig:
    name: str
    type: str  # Kafka's ConfigDef type: INT, LONG, LIST, CLASS, PASSWORD...
    default: str | None  # as DescribeConfigs shows it
    validator: str  # Kafka's description of the rule, e.g. "[1,...]"
    mode: str  # "read-only", "per-broker" or "cluster-wide"
    listener_prefix_only: bool

    @property
    def dynamic(self) -> bool:
        return self.mode != "read-only"

    @property
    def config_type(self) -> int:
        return CONFIG_TYPES.get(self.type, 0)

    @property
    def sensitive(self) -> bool:
        return self.type == "PASSWORD"


@functools.cache
def catalogue() -> dict[str, KafkaBrokerConfig]:
    out: dict[str, KafkaBrokerConfig] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines()[2:]:
        name, kind, default, validator, mode, prefixed = line.split("\t")
        out[name] = KafkaBrokerConfig(name, kind, None if default == "\\N" else default,
                                      validator, mode, prefixed == "true")
    return out


def listener_base(name: str) -> str | None:
    """``ssl.keystore.type`` for ``listener.name.internal.ssl.keystore.type``, else None."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match.group(1) if match else None


def _number(text: str) -> float | int:
    return float(text) if any(c in text for c in ".E") else int(text)


def check_value(entry: KafkaBrokerConfig, text: str) -> None:
    """Parse ``text`` as Kafka would for ``entry``; raises ValueError with Kafka's reason."""
    value = text.strip()
    kind = entry.type
    number: float | int | None = None
    if kind == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"Invalid value {value} for configuration {entry.name}: Expected "
                             "value to be either true or false")
        return
    if kind in _INT_RANGES:
        bits = _INT_RANGES[kind]
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not -(1 << bits) <= number < (1 << bits):
            raise ValueError(f"Invalid value {value} for configuration {entry.name}: Not a "
                             f"number of type {kind}")
    elif kind == "DOUBLE":
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"Invalid value {value} for configuration {entry.name}: Not a "
                             "number of type DOUBLE") from None
    rule = entry.validator
    if number is not None:
        low = high = extra = None
        if match := _AT_LEAST.fullmatch(rule):
            low = match.group(1)
        elif match := _BETWEEN.fullmatch(rule):
            low, high, extra = match.group(1), match.group(2), match.group(4)
        if extra is not None and number == _number(extra):
            return
        if low is not None and number < _number(low):
            raise ValueError(f"Invalid value {number} for configuration {entry.name}: Value "
                             f"must be at least {low}")
        if high is not None and number > _number(high):
            raise ValueError(f"Invalid value {number} for configuration {entry.name}: Value "
                             f"must be no more than {high}")
        return
    if kind in ("STRING", "LIST") and (match := _CHOICES.fullmatch(rule)) and "," in rule:
        choices = [c.strip() for c in match.group(1).split(",")]
        items = [i.strip() for i in value.split(",")] if kind == "LIST" else [value]
        for item in items:
            if item and item not in choices:
                raise ValueError(f"Invalid value {item if kind == 'LIST' else value} for "
                                 f"configuration {entry.name}: String must be one of: "
                                 f"{', '.join(choices)}")


def _names(names: list[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def _check_thread_count(name: str, text: str, current: str | None) -> None:
    """Kafka resizes its thread pools at run time by at most a factor of two per change."""
    if current is None:
        return
    now, wanted = int(current), int(text.strip())
    if wanted > 2 * now:
        rule = f"value should not be greater than double the current value {now}"
    elif wanted < now / 2:
        rule = f"value should be at least half the current value {now}"
    else:
        return
    raise InvalidRequestError(
        "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count "
        f"update validation failed for {name}={wanted}, {rule} for configuration Invalid "
        "dynamic configuration")


def validate_broker_update(values: dict[str, str | None], per_broker: bool,
                           current: dict[str, str | None] | None = None) -> None:
    """Kafka's checks of a change to a broker resource (``per_broker``: a named broker, not
    the cluster default); ``None`` values are deletions; ``current`` maps a config to the
    value the broker shows now (for the thread-pool rule). Raises InvalidRequestError."""
    known = catalogue()
    values = {name: text for name, text in values.items() if text is not None}  # SETs
    static = [n for n in values if n in known and not known[n].dynamic]
    if static:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {_names(static)}")
    unprefixed = [n for n in values if n in known and known[n].listener_prefix_only]
    if unprefixed:
        raise InvalidRequestError("These security configs can be dynamically updated only "
                                  f"per-listener using the listener prefix: {_names(unprefixed)}")
    for name, text in values.items():
        entry = known.get(listener_base(name) or name)
        if entry is not None and text is not None:  # text is never None here
            try:
                check_value(entry, text)
            except ValueError as exc:
                raise InvalidRequestError(str(exc)) from None
    for name, text in values.items():
        if name in THREAD_POOL_CONFIGS and text is not None:
            _check_thread_count(name, text, (current or {}).get(name, known[name].default))
    if not per_broker:
        only_per_broker = [n for n in values
                           if (n in known and known[n].mode == "per-broker")
                           or (listener_base(n) or "") not in ("",
                                                               *_CLUSTER_LEVEL_LISTENER_CONFIGS)]
        if only_per_broker:
            raise InvalidRequestError("Cannot update these configs at default cluster level, "
                                      f"broker id must be specified: {_names(only_per_broker)}")
