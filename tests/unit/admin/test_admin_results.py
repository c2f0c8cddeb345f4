"""The admin client's result types, settings and argument checks (no broker needed)."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from sdk.admin import (
    AdminConfig,
    AlterConfigOp,
    AlterConfigOpType,
    CommittedOffset,
    ConfigResource,
    ConfigResourceType,
    GroupLag,
    ItemsFailedError,
    NewPartitions,
    OffsetSpec,
    PartitionLag,
    ResultSet,
    TopicResult,
    configs,
    groups,
    offsets,
    topics,
)
from sdk.admin.dispatch import Deadline, Dispatcher, default_retry
from sdk.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from sdk.net import NetClient
from sdk.types import NewTopic, TopicPartition

# ============================================================================ ResultSet


def _results() -> ResultSet[str, TopicResult]:
    return ResultSet({
        "a": TopicResult("a"),
        "b": TopicResult("b", TopicAlreadyExistsError("b exists")),
        "c": TopicResult("c", NotControllerError()),
    }, "create topics")


def test_result_set_is_a_read_only_mapping_in_item_order() -> None:
    results = _results()
    assert list(results) == ["a", "b", "c"]
    assert len(results) == 3 and "b" in results and "z" not in results
    assert results["a"].error is None
    with pytest.raises(TypeError):
        results["d"] = TopicResult("d")  # type: ignore[index]


def test_result_set_separates_successes_and_errors() -> None:
    results = _results()
    assert not results.ok
    assert set(results.succeeded) == {"a"}
    assert set(results.errors) == {"b", "c"}
    assert isinstance(results.errors["b"], TopicAlreadyExistsError)
    assert ResultSet({"a": TopicResult("a")}).ok


def test_raise_if_failed_names_every_failed_item() -> None:
    with pytest.raises(ItemsFailedError) as caught:
        _results().raise_if_failed()
    err = caught.value
    assert set(err.errors) == {"b", "c"}
    text = str(err)
    assert text.startswith("create topics: 2 of 3 failed")
    assert "b: TOPIC_ALREADY_EXISTS" in text and "c: NOT_CONTROLLER" in text
    assert isinstance(err.__cause__, TopicAlreadyExistsError)
    ok = ResultSet({"a": TopicResult("a")})
    assert ok.raise_if_failed() is ok


def test_group_lag_totals_known_lags_only() -> None:
    tp = TopicPartition
    lag = GroupLag("g", "Empty", (
        PartitionLag(tp("t", 0), 5, 15, 10),
        PartitionLag(tp("t", 1), None, 7, None),
        PartitionLag(tp("t", 2), 3, None, None, error=UnknownTopicOrPartitionError()),
    ))
    assert lag.total_lag == 10
    assert set(lag.errors) == {tp("t", 2)}


# ============================================================================ value types


def test_config_resource_helpers() -> None:
    assert ConfigResource.topic("orders") == ConfigResource(ConfigResourceType.TOPIC, "orders")
    assert ConfigResource.broker(3).name == "3"
    assert str(ConfigResource.broker(3)) == "broker:3"
    assert sorted([ConfigResource.broker(1), ConfigResource.topic("a")])[0].type == \
        ConfigResourceType.TOPIC
    assert len({ConfigResource.topic("a"), ConfigResource.topic("a")}) == 1


def test_alter_config_op_needs_a_value_except_for_delete() -> None:
    assert AlterConfigOp("retention.ms", "1").op == AlterConfigOpType.SET
    assert AlterConfigOp("retention.ms", op=AlterConfigOpType.DELETE).value is None
    with pytest.raises(ValueError, match="needs a value"):
        AlterConfigOp("cleanup.policy", op=AlterConfigOpType.APPEND)
    with pytest.raises(ValueError, match="config name"):
        AlterConfigOp("", "x")


def test_new_partitions_and_offset_spec() -> None:
    assert NewPartitions(4).total_count == 4
    with pytest.raises(ValueError):
        NewPartitions(0)
    assert (OffsetSpec.LATEST, OffsetSpec.EARLIEST, OffsetSpec.MAX_TIMESTAMP) == (-1, -2, -3)


def test_errors_in_results_survive_pickling() -> None:
    result = CommittedOffset(TopicPartition("t", 0), 5, error=TopicAlreadyExistsError("x"))
    back = pickle.loads(pickle.dumps(result))
    assert back.topic_partition == result.topic_partition and back.offset == 5
    assert isinstance(back.error, TopicAlreadyExistsError) and back.error.message == "x"


# ============================================================================ settings


def test_admin_config_takes_dotted_names_and_rejects_unknown_keys() -> None:
    cfg = AdminConfig.build({"bootstrap.servers": "h:1", "default.api.timeout.ms": "5000"})
    assert cfg.default_api_timeout_ms == 5000
    assert cfg.bootstrap_servers == [("h", 1)]
    assert cfg.client_id.startswith("kafka-sdk-admin-")
    with pytest.raises(ConfigError) as caught:
        AdminConfig.build(bootstrap_servers="h:1", linger_ms=5)
    assert caught.value.key == "linger_ms"
    with pytest.raises(ConfigError, match=r"default\.api\.timeout\.ms"):
        AdminConfig.build({"bootstrap.servers": "h:1", "default.api.timeout.ms": "-3"})


def test_default_retry_treats_unknown_topics_as_answers() -> None:
    assert default_retry(NotControllerError())
    assert default_retry(KafkaConnectionError("lost"))
    assert not default_retry(UnknownTopicOrPartitionError())
    assert not default_retry(TopicAlreadyExistsError())
    assert not default_retry(ValueError("x"))


def test_deadline_timeout_error_names_the_last_error() -> None:
    err = Deadline(0.5).timeout_error("create topic for t", NotControllerError())
    assert isinstance(err, KafkaTimeoutError)
    assert "within 0.5 s" in str(err) and "NOT_CONTROLLER" in str(err)
    assert isinstance(err.__cause__, NotControllerError)


# ============================================================================ argument checks


def _dispatcher() -> Dispatcher:
    cfg = AdminConfig.build(bootstrap_servers="127.0.0.1:1")
    return Dispatcher(NetClient(cfg), cfg)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda d, dl: topics.create_topics(d, [NewTopic("a"), NewTopic("a")], validate_only=False,
                                        deadline=dl), ValueError, "given twice"),
    (lambda d, dl: topics.create_topics(d, ["a"], validate_only=False, deadline=dl),  # type: ignore[list-item]
     TypeError, "NewTopic"),
    (lambda d, dl: topics.delete_topics(d, "orders", deadline=dl), TypeError, "not one string"),
    (lambda d, dl: topics.delete_topics(d, ["a", ""], deadline=dl), ValueError, "non-empty"),
    (lambda d, dl: configs.describe_configs(d, ["orders"], names=None,  # type: ignore[list-item]
                                            include_synonyms=False,
                                            include_documentation=False, deadline=dl),
     TypeError, "ConfigResource"),
    (lambda d, dl: configs.alter_configs(d, {ConfigResource.topic("t"): []},
                                         validate_only=False, deadline=dl),
     ValueError, "no changes"),
    (lambda d, dl: offsets.list_offsets(d, {TopicPartition("t", 0): -7},
                                        isolation_level="read_uncommitted", deadline=dl),
     ValueError, "timestamps are >= 0"),
    (lambda d, dl: offsets.list_offsets(d, {TopicPartition("t", 0): "latest"},  # type: ignore[dict-item]
                                        isolation_level="read_uncommitted", deadline=dl),
     TypeError, "OffsetSpec"),
    (lambda d, dl: offsets.list_offsets(d, {TopicPartition("t", 0): OffsetSpec.LATEST},
                                        isolation_level="dirty", deadline=dl),
     ValueError, "isolation_level"),
    (lambda d, dl: offsets.delete_records(d, {TopicPartition("t", 0): -5}, deadline=dl),
     ValueError, "-1 for the high watermark"),
    (lambda d, dl: groups.alter_group_offsets(d, "g", {TopicPartition("t", 0): -1}, deadline=dl),
     ValueError, ">= 0"),
    (lambda d, dl: groups.describe_groups(d, ["g", "g"], deadline=dl), ValueError, "twice"),
    (lambda d, dl: groups.reset_group_offsets(d, "g", OffsetSpec.MAX_TIMESTAMP, topics=None,
                                              partitions=None, dry_run=True, deadline=dl),
     ValueError, "MAX_TIMESTAMP"),
])
def test_bad_arguments_fail_before_any_request(call, error, match) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        await call(_dispatcher(), Deadline(1.0))

    with pytest.raises(error, match=match):
        asyncio.run(run())
