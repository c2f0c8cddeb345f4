"""Option parsing and validation of the kafka_sdk format (no Spark session, no broker)."""

from __future__ import annotations

import pickle
import re

import pytest

from sdk.errors import ConfigError
from sdk.spark.foreach import sink_options
from sdk.spark.offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    PartitionTimestamps,
    SpecificOffsets,
    offsets_from_json,
    offsets_to_json,
)
from sdk.spark.options import (
    FORBIDDEN_KAFKA_OPTIONS,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from sdk.types import TopicPartition

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"}


def batch(**extra: str) -> object:
    return parse_source_options({**BASE, **extra}, streaming=False)


def stream(**extra: str) -> object:
    return parse_source_options({**BASE, **extra}, streaming=True)


def test_defaults_follow_sparks_connector() -> None:
    b = batch()
    assert b.starting == Earliest() and b.ending == Latest()
    assert b.fail_on_data_loss is True and b.include_headers is False
    s = stream()
    assert s.starting == Latest() and s.ending is None
    assert b.consumer_config == {"bootstrap.servers": "127.0.0.1:9092"}


def test_keys_are_case_insensitive_as_spark_lowercases_them() -> None:
    opts = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "a, b,a",
                                 "startingoffsets": "EARLIEST", "INCLUDEHEADERS": "True"},
                                streaming=True)
    assert opts.selection.topics == ("a", "b")
    assert opts.starting == Earliest() and opts.include_headers is True


def test_exactly_one_of_assign_subscribe_pattern() -> None:
    with pytest.raises(ConfigError, match="exactly one of"):
        parse_source_options({"kafka.bootstrap.servers": "h:1"}, streaming=False)
    with pytest.raises(ConfigError, match=r"got subscribe, subscribePattern"):
        batch(subscribePattern="ev.*")
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1",
                                 "assign": '{"a": [1, 0], "b": [2]}'}, streaming=False)
    assert opts.selection.assigned == (TopicPartition("a", 0), TopicPartition("a", 1),
                                       TopicPartition("b", 2))
    pattern = parse_source_options({"kafka.bootstrap.servers": "h:1",
                                    "subscribePattern": "ev.*"}, streaming=False).selection
    assert pattern.wants("events") and not pattern.wants("my-events")  # whole-name match


@pytest.mark.parametrize(("options", "message"), [
    ({"assign": "[1, 2]"}, "non-empty JSON object"),
    ({"assign": '{"a": []}'}, "non-empty list"),
    ({"assign": '{"a": [-1]}'}, "negative"),
    ({"subscribePattern": "("}, "not a valid regular expression"),
    ({"subscribe": " , "}, "at least one topic"),
])
def test_bad_topic_selection(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options({"kafka.bootstrap.servers": "h:1", **options}, streaming=False)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers"):
        parse_source_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers"):
        parse_sink_options({"topic": "t"})


def test_json_offsets_with_special_values() -> None:
    opts = batch(startingOffsets='{"events": {"0": 23, "1": -2}}',
                 endingOffsets='{"events": {"0": -1, "1": 50}}')
    assert opts.starting == SpecificOffsets({TopicPartition("events", 0): 23,
                                             TopicPartition("events", 1): EARLIEST})
    assert opts.ending == SpecificOffsets({TopicPartition("events", 0): LATEST,
                                           TopicPartition("events", 1): 50})


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": "latest"}, "can't be 'latest' for batch"),
    ({"endingOffsets": "earliest"}, "can't be 'earliest' for batch"),
    ({"startingOffsets": '{"events": {"0": -1}}'}, "can't be latest"),
    ({"endingOffsets": '{"events": {"0": -2}}'}, "can't be earliest"),
    ({"startingOffsets": '{"events": {"0": -3}}'}, "must be >= 0"),
    ({"startingOffsets": "{not json"}, "not valid JSON"),
    ({"startingOffsets": '{"events": {"x": 1}}'}, "not a number"),
    ({"startingOffsets": '{"events": {"0": true}}'}, "must be an integer"),
    ({"startingTimestamp": "-5"}, "must be >= 0"),
    ({"minPartitions": "0"}, "must be >= 1"),
    ({"maxRecordsPerPartition": "lots"}, "must be an integer"),
    ({"failOnDataLoss": "maybe"}, "true or false"),
    ({"startingOffsetsByTimestampStrategy": "closest"}, "'error' or 'latest'"),
])
def test_bad_batch_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        batch(**options)


@pytest.mark.parametrize("name", ["endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"])
def test_streaming_rejects_ending_offsets(name: str) -> None:
    value = "1000" if name == "endingTimestamp" else (
        '{"events": {"0": 5}}' if name != "endingOffsets" else "latest")
    with pytest.raises(ConfigError, match="not valid in streaming queries"):
        stream(**{name: value})


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    opts = batch(startingTimestamp="1000", startingOffsetsByTimestamp='{"events": {"0": 5}}',
                 startingOffsets="earliest", endingOffsetsByTimestamp='{"events": {"0": 9000}}',
                 endingOffsets="latest")
    assert opts.starting == GlobalTimestamp(1000)
    assert opts.ending == PartitionTimestamps({TopicPartition("events", 0): 9000})
    assert stream(startingOffsetsByTimestampStrategy="LATEST").starting_timestamp_strategy \
        == "latest"


@pytest.mark.parametrize("name", sorted(FORBIDDEN_KAFKA_OPTIONS))
def test_forbidden_kafka_options_get_a_clear_error(name: str) -> None:
    for options in ({**BASE, f"kafka.{name}": "x"}, {**BASE, name: "x"}):
        with pytest.raises(ConfigError, match=re.escape(f"Kafka option '{name}' is not supported")) as err:
            parse_source_options(options, streaming=False)
        assert FORBIDDEN_KAFKA_OPTIONS[name] in str(err.value)
        with pytest.raises(ConfigError, match=re.escape(f"Kafka option '{name}' is not supported")):
            parse_sink_options({"kafka.bootstrap.servers": "h:1", f"kafka.{name}": "x"})


def test_unknown_option_is_an_error_not_ignored() -> None:
    with pytest.raises(ConfigError, match="unknown option 'startingoffset'") as err:
        batch(startingOffset="earliest")
    assert "startingOffsets" in str(err.value)  # the allowed list names the real spelling
    with pytest.raises(ConfigError, match="unknown option 'subscribe'"):
        parse_sink_options({**BASE})


def test_kafka_options_pass_through_without_prefix() -> None:
    opts = batch(**{"kafka.fetch.max.bytes": "1048576", "kafka.isolation.level":
                    "read_committed"})
    assert opts.consumer_config == {"bootstrap.servers": "127.0.0.1:9092",
                                    "fetch.max.bytes": "1048576",
                                    "isolation.level": "read_committed"}
    sink = parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "5",
                               "topic": "out", "checkpointLocation": "/tmp/x"})
    assert sink.producer_config == {"bootstrap.servers": "h:1", "linger.ms": "5"}
    assert sink.topic == "out"


def test_streaming_limits() -> None:
    opts = stream(maxOffsetsPerTrigger="1000", minOffsetsPerTrigger="10",
                  maxTriggerDelay="30s")
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger,
            opts.max_trigger_delay_ms) == (1000, 10, 30_000)
    assert [parse_duration_ms(t, "d") for t in ("250", "250ms", "2m", "1h", "1d")] == [
        250, 250, 120_000, 3_600_000, 86_400_000]
    with pytest.raises(ConfigError, match="duration"):
        parse_duration_ms("soon", "maxTriggerDelay")


def test_options_and_offsets_survive_pickling() -> None:
    opts = batch(startingOffsets='{"events": {"0": 3}}', includeHeaders="true")
    assert pickle.loads(pickle.dumps(opts)) == opts
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 0): 3}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 3}, "b": {"1": 7}}
    assert offsets_from_json(as_json) == offsets


def test_foreach_batch_sink_options() -> None:
    options = sink_options("h:1", "out", {"compression.type": "gzip"},
                           {"linger_ms": 5, "enable_idempotence": False})
    assert options == {"kafka.bootstrap.servers": "h:1", "topic": "out",
                       "kafka.compression.type": "gzip", "kafka.linger.ms": "5",
                       "kafka.enable.idempotence": "false"}
    with pytest.raises(ConfigError, match=r"'value\.serializer' is not supported"):
        sink_options("h:1", "out", None, {"value_serializer": "x"})
