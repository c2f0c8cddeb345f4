"""OpenTelemetry tracing of records, off unless a client sets ``tracing=True``.

Producer: each ``send`` starts a span ``send <topic>`` (kind PRODUCER) as a child of the
caller's current span, injects its W3C trace context into the record's headers
(``traceparent``, and ``tracestate`` when there is one; an existing ``traceparent`` is
replaced), and ends it when the record is acknowledged or fails, with the partition and
offset. Consumer: each record handed to the application gets a span ``process <topic>``
(kind CONSUMER) that continues the trace its headers carry. Attributes follow the
OpenTelemetry messaging conventions: ``messaging.system=kafka``,
``messaging.destination.name``, ``messaging.destination.partition.id``,
``messaging.kafka.offset``, ``messaging.kafka.message.key``, ``messaging.operation.type``,
``messaging.client.id``, ``messaging.consumer.group.name``.

A traced ``send`` takes the general path (the record has headers), so tracing costs a
span and a header per record: it is for following records, not for bulk throughput.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["TRACE_HEADERS", "ConsumerTracing", "ProducerTracing", "valid_traceparent"]

TRACE_HEADERS = ("traceparent", "tracestate")
_VERSION = "0.1.0"


def _otel() -> Any:
    try:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError as exc:  # the optional extra
        raise ImportError("tracing=True needs OpenTelemetry: pip install 'kafka-sdk[otel]'"
                          ) from exc
    return trace, TraceContextTextMapPropagator()


def valid_traceparent(value: str) -> bool:
    """True for a W3C ``traceparent`` of version 00 with non-zero trace and span ids."""
    parts = value.split("-")
    if len(parts) != 4 or [len(p) for p in parts] != [2, 32, 16, 2]:
        return False
    try:
        [int(p, 16) for p in parts]
    except ValueError:
        return False
    return (parts[0] == "00" and parts[0].lower() == parts[0] and int(parts[1], 16) != 0
            and int(parts[2], 16) != 0 and parts[1] == parts[1].lower())


class _Tracing:
    def __init__(self, client_id: str, tracer_provider: Any = None) -> None:
        trace, self._propagator = _otel()
        self._trace = trace
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("kafka-sdk", _VERSION)
        self.client_id = client_id


class ProducerTracing(_Tracing):
    """Spans and trace-context headers for ``send`` (see the module docstring)."""

    def begin(self, topic: str, key: Any, headers: Iterable[tuple[str, bytes | None]] | None,
              partition: int | None) -> tuple[Any, list[tuple[str, bytes | None]]]:
        trace = self._trace
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
            "messaging.client.id": self.client_id,
        }
        if isinstance(key, (bytes, str)):
            attributes["messaging.kafka.message.key"] = (
                key.decode("utf-8", "replace") if isinstance(key, bytes) else key)
        if partition is not None:
            attributes["messaging.destination.partition.id"] = str(partition)
        span = self.tracer.start_span(f"send {topic}", kind=trace.SpanKind.PRODUCER,
                                      attributes=attributes)
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=trace.set_span_in_context(span))
        out = [(k, v) for k, v in (headers or ()) if k not in TRACE_HEADERS]
        out.extend((k, v.encode()) for k, v in carrier.items())
        return span, out

    def end(self, span: Any, future: Any) -> None:
        """Finish the span when ``future`` (the record's) completes."""
        def done(fut: Any) -> None:
            error = fut.exception()
            if error is None:
                meta = fut.result()
                span.set_attribute("messaging.destination.partition.id", str(meta.partition))
                if meta.offset >= 0:
                    span.set_attribute("messaging.kafka.offset", meta.offset)
            else:
                span.record_exception(error)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)))
                span.set_attribute("error.type", type(error).__name__)
            span.end()

        future.add_done_callback(done)


class ConsumerTracing(_Tracing):
    """A span per record handed out, continuing the producer's trace."""

    def __init__(self, client_id: str, group_id: str | None,
                 tracer_provider: Any = None) -> None:
        super().__init__(client_id, tracer_provider)
        self.group_id = group_id

    def consumed(self, records: Iterable[Any]) -> None:
        trace = self._trace
        for record in records:
            carrier = {k: v.decode("latin-1") for k, v in record.headers
                       if k in TRACE_HEADERS and v is not None}
            parent = self._propagator.extract(carrier) if carrier else None
            attributes: dict[str, Any] = {
                "messaging.system": "kafka",
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": record.topic,
                "messaging.destination.partition.id": str(record.partition),
                "messaging.kafka.offset": record.offset,
                "messaging.client.id": self.client_id,
            }
            if self.group_id:
                attributes["messaging.consumer.group.name"] = self.group_id
            key = record.key
            if isinstance(key, (bytes, str)):
                attributes["messaging.kafka.message.key"] = (
                    key.decode("utf-8", "replace") if isinstance(key, bytes) else key)
            span = self.tracer.start_span(f"process {record.topic}", context=parent,
                                          kind=trace.SpanKind.CONSUMER, attributes=attributes)
            span.end()


def intercept_sync(send: Callable[..., Any], on_send: Callable[..., None] | None,
                   tracing: ProducerTracing | None) -> Callable[..., Any]:
    """``send`` (blocking signature) calling the ``on_send`` hooks and tracing first."""
    @functools.wraps(send)
    def intercepted(topic: str, value: Any = None, key: Any = None, headers: Any = None,
                    partition: int | None = None, *args: Any, **kwargs: Any) -> Any:
        if on_send is not None:
            on_send(topic, partition, key, value, headers)
        if tracing is None:
            return send(topic, value, key, headers, partition, *args, **kwargs)
        span, headers = tracing.begin(topic, key, headers, partition)
        try:
            fut = send(topic, value, key, headers, partition, *args, **kwargs)
        except BaseException as exc:
            span.record_exception(exc)
            span.end()
            raise
        tracing.end(span, fut)
        return fut

    return intercepted


def intercept_async(send: Callable[..., Awaitable[Any]], on_send: Callable[..., None] | None,
                    tracing: ProducerTracing | None) -> Callable[..., Awaitable[Any]]:
    """The same for the asyncio ``send``."""
    @functools.wraps(send)
    async def intercepted(topic: str, value: Any = None, key: Any = None, headers: Any = None,
                          partition: int | None = None, *args: Any, **kwargs: Any) -> Any:
        if on_send is not None:
            on_send(topic, partition, key, value, headers)
        if tracing is None:
            return await send(topic, value, key, headers, partition, *args, **kwargs)
        span, headers = tracing.begin(topic, key, headers, partition)
        try:
            fut = await send(topic, value, key, headers, partition, *args, **kwargs)
        except BaseException as exc:
            span.record_exception(exc)
            span.end()
            raise
        tracing.end(span, fut)
        return fut

    return intercepted
