"""One configuration form on every client: keyword settings, ``config={...}`` with Kafka's
dotted names, and a mapping as the first positional argument (the confluent-kafka habit),
alone or together, on Producer, AsyncProducer, Consumer, AsyncConsumer, AdminClient and
AsyncAdminClient -- all read by CommonConfig.from_arguments. The last tests build each of
the six classes each of the three ways against the embedded reference broker and use it."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sdk import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    Producer,
)
from sdk.errors import ConfigError

FORMS = ["keywords", "config=", "positional"]
ASYNC_CLASSES: list[type[Any]] = [AsyncProducer, AsyncConsumer, AsyncAdminClient]


def settings_for(cls: type[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same settings as keywords and as dotted names, for ``cls``'s role."""
    keywords: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:1", "client_id": "forms",
                                "request_timeout_ms": 7000}
    if cls in (Producer, AsyncProducer):
        keywords["linger_ms"] = 3
    elif cls in (Consumer, AsyncConsumer):
        keywords.update(group_id="g", auto_offset_reset="earliest")
    dotted = {k.replace("_", "."): v for k, v in keywords.items()}
    return keywords, dotted


def build(cls: type[Any], form: str, keywords: dict[str, Any], dotted: dict[str, Any],
          *topics: str) -> Any:
    if form == "keywords":
        return cls(*topics, **keywords)
    if form == "config=":
        return cls(*topics, config=dotted)
    return cls(dotted, *topics)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("cls", ASYNC_CLASSES, ids=lambda c: c.__name__)
def test_three_forms_give_the_same_config(cls: type[Any], form: str) -> None:
    keywords, dotted = settings_for(cls)
    client = build(cls, form, keywords, dotted)
    cfg = client.config
    assert cfg.client_id == "forms" and cfg.request_timeout_ms == 7000
    assert cfg.bootstrap_servers == [("127.0.0.1", 1)]
    assert cfg == type(cfg).build(**keywords)


@pytest.mark.parametrize("cls", ASYNC_CLASSES, ids=lambda c: c.__name__)
def test_mapping_config_and_keywords_merge(cls: type[Any]) -> None:
    client = cls({"bootstrap.servers": "127.0.0.1:1"}, config={"client.id": "merged"},
                 request_timeout_ms=6000)
    assert (client.config.client_id, client.config.request_timeout_ms) == ("merged", 6000)
    # The same setting twice with the same value is fine ("6000" from a file is 6000) ...
    client = cls({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "6000"},
                 request_timeout_ms=6000)
    assert client.config.request_timeout_ms == 6000
    # ... with different values it is an error naming both spellings.
    with pytest.raises(ConfigError) as info:
        cls({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 5000},
            request_timeout_ms=6000)
    assert "given twice with different values" in str(info.value)
    assert "'request.timeout.ms'=5000" in str(info.value)
    assert "'request_timeout_ms'=6000" in str(info.value)


def test_readme_producer_example_form() -> None:
    # README: Producer(bootstrap_servers=..., config={"linger.ms": 5}) -- failed before
    # ("config" was positional-only, so config= was read as an unknown setting).
    producer = AsyncProducer(bootstrap_servers="127.0.0.1:1", config={"linger.ms": 9})
    assert producer.config.linger_ms == 9


def test_confluent_style_consumer_dict() -> None:
    # Consumer({"bootstrap.servers": ..., "group.id": ...}) -- before, the dict was taken for
    # a topic name and the consumer said "bootstrap_servers: is required".
    consumer = AsyncConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    assert consumer.config.group_id == "g"
    assert consumer.subscription() == set()
    consumer = AsyncConsumer("a", {"bootstrap.servers": "127.0.0.1:1"}, "b")
    assert consumer.subscription() == {"a", "b"}


def test_a_mapping_without_setting_names_among_topics_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        AsyncConsumer({"orders": 3, "payments": 1}, bootstrap_servers="127.0.0.1:1")
    assert "holds no consumer setting names" in str(info.value)
    assert "topics are names (str)" in str(info.value)
    with pytest.raises(TypeError, match="topics are names"):
        AsyncConsumer(["orders"], bootstrap_servers="127.0.0.1:1")  # type: ignore[call-overload]
    # Setting names with one unknown among them: the usual unknown-setting error.
    with pytest.raises(ConfigError, match=r"group\.idd: unknown setting"):
        AsyncConsumer({"bootstrap.servers": "127.0.0.1:1", "group.idd": "g"})


def test_a_non_mapping_where_settings_belong_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("did you mean bootstrap_servers='127.0.0.1:1'")):
        AsyncProducer("127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="admin client takes its settings as keyword"):
        AsyncAdminClient(["127.0.0.1:1"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="config must be a mapping"):
        AsyncProducer(bootstrap_servers="127.0.0.1:1", config="linger.ms=5")


# ---------------------------------------------------------------- against a real broker


@pytest.fixture(scope="module")
def topic(embedded_broker: Any) -> str:
    name = f"forms-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=embedded_broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    return name


def broker_settings(bootstrap: str, role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    keywords: dict[str, Any] = {"bootstrap_servers": bootstrap}
    if role == "consumer":
        keywords.update(group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest")
    return keywords, {k.replace("_", "."): v for k, v in keywords.items()}


def poll_until_any(consumer: Consumer[Any, Any]) -> list[Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=200)
        if batch:
            return [r for records in batch.values() for r in records]
    return []


@pytest.mark.parametrize("form", FORMS)
def test_blocking_clients_work_built_each_way(embedded_broker: Any, topic: str,
                                              form: str) -> None:
    bs = embedded_broker.bootstrap_servers
    keywords, dotted = broker_settings(bs, "producer")
    with build(Producer, form, keywords, dotted) as producer:
        meta = producer.send(topic, form.encode()).result(timeout=10)
        assert meta.topic == topic and meta.offset >= 0
    keywords, dotted = broker_settings(bs, "admin")
    with build(AdminClient, form, keywords, dotted) as admin:
        assert topic in admin.list_topics()
    keywords, dotted = broker_settings(bs, "consumer")
    with build(Consumer, form, keywords, dotted, topic) as consumer:
        records = poll_until_any(consumer)
    assert records and all(r.topic == topic for r in records)


@pytest.mark.parametrize("form", FORMS)
async def test_async_clients_work_built_each_way(embedded_broker: Any, topic: str,
                                                 form: str) -> None:
    bs = embedded_broker.bootstrap_servers
    keywords, dotted = broker_settings(bs, "producer")
    async with build(AsyncProducer, form, keywords, dotted) as producer:
        meta = await producer.send_and_wait(topic, form.encode())
        assert meta.topic == topic and meta.offset >= 0
    keywords, dotted = broker_settings(bs, "admin")
    async with build(AsyncAdminClient, form, keywords, dotted) as admin:
        assert topic in await admin.list_topics()
    keywords, dotted = broker_settings(bs, "consumer")
    async with build(AsyncConsumer, form, keywords, dotted, topic) as consumer:
        batch = await consumer.getmany(timeout_ms=10_000)
    assert any(r.topic == topic for records in batch.values() for r in records)


def test_java_properties_file_drives_a_real_producer_and_consumer(
        embedded_broker: Any, topic: str) -> None:
    """Kafka-style properties files, pointed at the embedded broker, used as they are."""
    from pathlib import Path

    from sdk.net.properties import read_properties

    files = Path(__file__).parent / "config_files"
    bs = embedded_broker.bootstrap_servers
    produced = read_properties(files / "producer.properties")
    produced["bootstrap.servers"] = bs
    with Producer(produced) as producer:
        producer.send(topic, b"payload", key="clé").result(timeout=10)  # StringSerializer
    consumed = read_properties(files / "consumer.properties")
    consumed.update({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                     "value.deserializer": "org.apache.kafka.common.serialization."
                                           "ByteArrayDeserializer"})
    consumed.pop("group.instance.id")
    check: Callable[[Any], bool] = lambda r: r.key == "clé" and r.value == b"payload"  # noqa: E731
    with Consumer(topic, consumed) as consumer:
        deadline = time.monotonic() + 20
        found = False
        while not found and time.monotonic() < deadline:
            found = any(check(r) for rs in consumer.poll(timeout_ms=200).values() for r in rs)
    assert found
