"""Logging: the client id on every ``sdk.*`` log line, and protocol debugging by subsystem.

Every module logs under the ``sdk`` hierarchy (``sdk.net.client``, ``sdk.producer.sender``,
...). A client sets :data:`client_id_var` in the context its event-loop tasks run in, so
each record a client's work logs carries ``record.client_id`` and its message starts with
``[client-id]`` (unless the message already names it). Credentials never reach a log
line: settings holding them are ``SecretStr`` and print as ``**********``, and protocol
debugging logs request kinds, sizes and timings, never payloads.

``debug="protocol,fetch"`` (librdkafka's ``debug`` contexts) sets the loggers of those
subsystems to DEBUG (:data:`DEBUG_CONTEXTS`), for the whole process as Python logging is
process-wide; with no logging configured at all, a stderr handler is added to ``sdk`` so
the lines show up, as librdkafka prints them.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable

__all__ = ["DEBUG_CONTEXTS", "apply_debug", "client_id_var", "parse_debug"]

client_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kafka_sdk_client_id", default=None)

# librdkafka's context names (and a few of ours) -> the loggers they turn to DEBUG.
DEBUG_CONTEXTS: dict[str, tuple[str, ...]] = {
    "protocol": ("sdk.net.protocol",),
    "broker": ("sdk.net.connection", "sdk.net.client", "sdk.net.protocol"),
    "metadata": ("sdk.net.client", "sdk.net.topic_problems"),
    "topic": ("sdk.net.topic_problems",),
    "security": ("sdk.net.security",),
    "producer": ("sdk.producer",),
    "msg": ("sdk.producer",),
    "queue": ("sdk.producer",),
    "eos": ("sdk.producer.transactions", "sdk.producer.idempotence"),
    "fetch": ("sdk.consumer.fetcher", "sdk.consumer.partition_records"),
    "consumer": ("sdk.consumer",),
    "cgrp": ("sdk.consumer.membership", "sdk.consumer.coordinator"),
    "admin": ("sdk.admin",),
    "generic": ("sdk",),
    "all": ("sdk",),
}


def parse_debug(text: str) -> list[str]:
    """``"protocol, fetch"`` -> the context names; ValueError naming an unknown one."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in DEBUG_CONTEXTS]
    if unknown:
        raise ValueError(f"unknown debug context(s) {', '.join(unknown)}; known: "
                         f"{', '.join(DEBUG_CONTEXTS)}")
    return names


def apply_debug(contexts: Iterable[str]) -> list[str]:
    """Set the loggers of ``contexts`` to DEBUG; returns their names."""
    loggers = sorted({name for c in contexts for name in DEBUG_CONTEXTS[c]})
    for name in loggers:
        logging.getLogger(name).setLevel(logging.DEBUG)
    sdk_log = logging.getLogger("sdk")
    if loggers and not logging.getLogger().handlers and not sdk_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        sdk_log.addHandler(handler)
    return loggers


_previous_factory = logging.getLogRecordFactory()


def _record_factory(*args: object, **kwargs: object) -> logging.LogRecord:
    record = _previous_factory(*args, **kwargs)
    client_id = client_id_var.get()
    if client_id is not None and record.name.startswith("sdk"):
        record.client_id = client_id
        msg = record.msg
        if isinstance(msg, str) and client_id not in msg and not (
                isinstance(record.args, tuple) and client_id in record.args):
            prefix = f"[{client_id}] "
            record.msg = (prefix.replace("%", "%%") if record.args else prefix) + msg
    return record


def install() -> None:
    """Put the client id on ``sdk.*`` records (once per process; chains any factory)."""
    global _previous_factory
    if getattr(logging.getLogRecordFactory(), "__name__", "") == "_record_factory":
        return
    _previous_factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(_record_factory)
