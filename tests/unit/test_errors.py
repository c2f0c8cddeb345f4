"""The error table, the classes built from it and the client-side errors."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys

import pytest

from sdk import errors
from sdk.error_codes import ERROR_CODES, class_name_for
from sdk.errors import (
    BROKER_ERRORS,
    AuthorizationError,
    BrokerResponseError,
    ConfigError,
    CorruptRecordError,
    DeliveryTimeoutError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MalformedDataError,
    NoCommonVersionError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    RetriableError,
    for_code,
    is_retriable,
    raise_for_code,
)

# ------------------------------------------------------------------------------- the table


def test_table_covers_every_code_up_to_kafka_4_1() -> None:
    assert sorted(ERROR_CODES) == [-1, *range(1, 134)]
    names = [info.name for info in ERROR_CODES.values()]
    assert len(set(names)) == len(names)
    for code, info in ERROR_CODES.items():
        assert info.code == code
        assert info.name.isupper() and " " not in info.name
        assert info.description.endswith(".") and len(info.description) < 140
        assert not info.invalid_metadata or info.retriable  # invalid metadata implies retriable


@pytest.mark.parametrize(
    ("code", "name", "retriable", "invalid_metadata"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False, False),
        (1, "OFFSET_OUT_OF_RANGE", False, False),
        (2, "CORRUPT_MESSAGE", True, False),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True),
        (6, "NOT_LEADER_OR_FOLLOWER", True, True),
        (7, "REQUEST_TIMED_OUT", True, False),
        (10, "MESSAGE_TOO_LARGE", False, False),
        (15, "COORDINATOR_NOT_AVAILABLE", True, False),
        (16, "NOT_COORDINATOR", True, False),
        (19, "NOT_ENOUGH_REPLICAS", True, False),
        (27, "REBALANCE_IN_PROGRESS", False, False),
        (35, "UNSUPPORTED_VERSION", False, False),
        (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
        (51, "CONCURRENT_TRANSACTIONS", True, False),
        (56, "KAFKA_STORAGE_ERROR", True, True),
        (75, "UNKNOWN_LEADER_EPOCH", True, False),
        (90, "PRODUCER_FENCED", False, False),
        (100, "UNKNOWN_TOPIC_ID", True, True),
        (128, "INVALID_REGULAR_EXPRESSION", False, False),
        (129, "REBOOTSTRAP_REQUIRED", False, False),
        (133, "SHARE_SESSION_LIMIT_REACHED", True, False),
    ],
)
def test_known_facts(code: int, name: str, retriable: bool, invalid_metadata: bool) -> None:
    cls = for_code(code)
    assert (cls.errno, cls.name, cls.retriable, cls.invalid_metadata) == (
        code,
        name,
        retriable,
        invalid_metadata,
    )


def test_agrees_with_kafka_python() -> None:
    kerrors = pytest.importorskip("kafka.errors")
    # Names kafka-python still spells the old way, and flags where we follow the Java client
    # (CorruptRecordException is retriable; UnknownLeaderEpochException needs no metadata refresh).
    renamed = {-1: "UNKNOWN", 6: "NOT_LEADER_FOR_PARTITION", 10: "MESSAGE_SIZE_TOO_LARGE"}
    renamed |= {17: "INVALID_TOPIC", 39: "INVALID_REPLICATION_ASSIGNMENT"}
    flags_differ = {2, 75}
    compared = 0
    for code, theirs in kerrors.kafka_errors.items():
        if code in (None, 0):
            continue
        ours = for_code(code)
        assert renamed.get(code, ours.name) == theirs.message, code
        if code not in flags_differ:
            assert (ours.retriable, ours.invalid_metadata) == (
                bool(theirs.retriable),
                bool(theirs.invalid_metadata),
            ), code
        compared += 1
    assert compared >= 127


# ------------------------------------------------------------------------------ the classes


def test_every_code_has_an_explicit_class_named_after_it() -> None:
    source = inspect.getsource(errors)
    assert set(BROKER_ERRORS) == set(ERROR_CODES)
    for code, info in ERROR_CODES.items():
        cls = BROKER_ERRORS[code]
        assert cls.__name__ == class_name_for(info.name)
        assert getattr(errors, cls.__name__) is cls
        assert f"class {cls.__name__}(" in source  # visible to readers and type checkers
        assert cls.description == info.description
        assert issubclass(cls, BrokerResponseError) and issubclass(cls, KafkaError)
        assert issubclass(cls, RetriableError) == info.retriable
        assert issubclass(cls, InvalidMetadataError) == info.invalid_metadata


def test_class_names() -> None:
    assert class_name_for("OFFSET_OUT_OF_RANGE") == "OffsetOutOfRangeError"
    assert class_name_for("KAFKA_STORAGE_ERROR") == "KafkaStorageError"
    assert class_name_for("INVALID_TOPIC_EXCEPTION") == "InvalidTopicError"
    assert errors.UnknownTopicOrPartitionError.errno == 3
    assert errors.CoordinatorNotAvailableError.errno == 15
    assert errors.NetworkError.errno == 13
    assert errors.UnknownServerError.errno == -1


def test_java_name_aliases() -> None:
    assert errors.RecordTooLargeError is errors.MessageTooLargeError
    assert errors.RecordTooLargeError.errno == 10
    assert errors.NotLeaderForPartitionError is NotLeaderOrFollowerError
    assert errors.RecordBatchTooLargeError.errno == 18
    assert errors.ControllerMovedError.errno == 11
    assert errors.TopicExistsError.errno == 36


def test_markers_catch_broker_and_client_errors() -> None:
    with pytest.raises(RetriableError):
        raise_for_code(6)
    with pytest.raises(InvalidMetadataError):
        raise_for_code(3)
    with pytest.raises(RetriableError):
        raise KafkaConnectionError("lost broker 1")
    with pytest.raises(AuthorizationError):
        raise_for_code(29)
    assert {c.errno for c in BROKER_ERRORS.values() if issubclass(c, AuthorizationError)} == {
        29,
        30,
        31,
        53,
        65,
    }


def test_raise_for_code() -> None:
    raise_for_code(0)  # success: no-op
    with pytest.raises(errors.OffsetOutOfRangeError) as info:
        raise_for_code(1, "orders-0 offset 99")
    assert info.value.message == "orders-0 offset 99"
    assert str(info.value).startswith("OFFSET_OUT_OF_RANGE (1): ")
    assert "orders-0 offset 99" in str(info.value)


def test_message_and_str() -> None:
    e = NotLeaderOrFollowerError()
    assert e.message is None
    assert str(e) == f"NOT_LEADER_OR_FOLLOWER (6): {NotLeaderOrFollowerError.description}"
    detailed = NotLeaderOrFollowerError("orders-3")
    assert str(detailed).endswith("[orders-3]")
    assert detailed.errno == 6 and detailed.name == "NOT_LEADER_OR_FOLLOWER"


def test_for_code_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError):
        for_code(0)


@pytest.mark.parametrize("code", [134, 999, 32767, -2, -32768])
def test_unknown_code_keeps_its_number(code: int) -> None:
    cls = for_code(code)
    assert cls is for_code(code)  # cached
    assert cls.errno == code
    assert cls.name == f"UNKNOWN_CODE_{code}"
    assert issubclass(cls, BrokerResponseError)
    assert not cls.retriable and not is_retriable(cls())
    assert code not in BROKER_ERRORS
    with pytest.raises(BrokerResponseError) as info:
        raise_for_code(code, "from a newer broker")
    assert info.value.errno == code
    assert f"UNKNOWN_CODE_{code} ({code})" in str(info.value)


def test_table_and_markers_cannot_disagree() -> None:
    with pytest.raises(TypeError, match="marker bases disagree"):

        class _Wrong(BrokerResponseError):  # code 6 is invalid-metadata, markers missing
            errno = 6


# --------------------------------------------------------------------------------- pickling


@pytest.mark.parametrize(
    "exc",
    [
        NotLeaderOrFollowerError("orders-3"),
        errors.UnknownServerError(),
        for_code(555)("new code"),
        KafkaConnectionError("refused"),
        DeliveryTimeoutError("record expired"),
        CorruptRecordError("crc mismatch"),
        ConfigError("bad value", key="acks", value="two", allowed=["all", 0, 1]),
        errors.WakeupError(),
    ],
)
def test_pickle_round_trip(exc: KafkaError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert back.args == exc.args
    assert str(back) == str(exc)


def test_unknown_code_unpickles_in_a_fresh_process() -> None:
    blob = pickle.dumps(for_code(4242)("x"))
    code = (
        "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); "
        "print(e.errno, e.name, e.message)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=blob, capture_output=True, check=True
    ).stdout
    assert out.decode().split() == ["4242", "UNKNOWN_CODE_4242", "x"]


# ------------------------------------------------------------------------ client-side errors


def test_client_error_hierarchy() -> None:
    assert issubclass(KafkaTimeoutError, TimeoutError)
    assert issubclass(DeliveryTimeoutError, KafkaTimeoutError)
    assert issubclass(KafkaConnectionError, ConnectionError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(CorruptRecordError, MalformedDataError)
    assert issubclass(ProducerClosedError, errors.IllegalStateError)
    assert issubclass(errors.ConsumerClosedError, errors.IllegalStateError)
    # The client-side "no shared version" is not the broker's UNSUPPORTED_VERSION code.
    assert not issubclass(NoCommonVersionError, BrokerResponseError)
    for cls in (
        MalformedDataError,
        NoCommonVersionError,
        KafkaTimeoutError,
        KafkaConnectionError,
        errors.NoBrokersAvailableError,
        ConfigError,
        errors.IllegalStateError,
        ProducerClosedError,
        errors.WakeupError,
    ):
        assert issubclass(cls, KafkaError)
        assert not issubclass(cls, BrokerResponseError)


def test_request_timeout_is_a_retriable_connection_error_and_a_timeout() -> None:
    import sdk.net
    import sdk.net.connection

    cls = errors.RequestTimeoutError
    assert cls.__module__ == "sdk.errors"
    assert issubclass(cls, KafkaConnectionError) and issubclass(cls, KafkaTimeoutError)
    assert issubclass(cls, TimeoutError) and issubclass(cls, ConnectionError)
    assert is_retriable(cls("no answer")) and cls.invalid_metadata
    # Its former homes still export it.
    assert sdk.net.RequestTimeoutError is cls
    assert sdk.net.connection.RequestTimeoutError is cls


def test_is_retriable() -> None:
    assert is_retriable(KafkaConnectionError())
    assert is_retriable(for_code(7)())
    assert not is_retriable(for_code(10)())
    assert not is_retriable(KafkaTimeoutError())  # the caller's time budget is spent
    assert not is_retriable(DeliveryTimeoutError())
    assert not is_retriable(ValueError())
    assert not is_retriable(None)


def test_causes_chain() -> None:
    root = OSError("connection reset")
    e = KafkaConnectionError("broker 1 went away", cause=root)
    assert e.__cause__ is root
    try:
        try:
            raise root
        except OSError as exc:
            raise MalformedDataError("truncated") from exc
    except MalformedDataError as caught:
        assert caught.__cause__ is root


def test_bare_client_errors_still_explain_themselves() -> None:
    assert str(errors.WakeupError()) == "A blocking call was interrupted by wakeup()."
    assert str(ProducerClosedError()) == "The producer is closed."
    assert str(KafkaTimeoutError("metadata for 'orders' after 60.0 s")).startswith("metadata")


def test_config_error_names_key_and_allowed_values() -> None:
    e = ConfigError("invalid value", key="acks", value="two", allowed=[0, 1, "all", -1])
    assert (e.key, e.value, e.allowed) == ("acks", "two", (0, 1, "all", -1))
    assert str(e) == "acks: invalid value; got 'two'; allowed: 0, 1, 'all', -1"
    unknown = ConfigError("unknown setting", key="lingr_ms", allowed="see ProducerConfig")
    assert str(unknown) == "lingr_ms: unknown setting; allowed: see ProducerConfig"
    assert str(ConfigError("linger_ms must be >= 0")) == "linger_ms must be >= 0"
    with pytest.raises(ValueError):
        raise e


def test_repr_keeps_the_message() -> None:
    detail = errors.OffsetOutOfRangeError("offset 7 of t-0")
    assert repr(detail) == f"OffsetOutOfRangeError({str(detail)!r})"
    assert "offset 7 of t-0" in repr(detail) and "OFFSET_OUT_OF_RANGE (1)" in repr(detail)
    assert repr(errors.OffsetOutOfRangeError()) == (
        "OffsetOutOfRangeError(\"OFFSET_OUT_OF_RANGE (1): The requested offset lies outside "
        "the range the partition's log currently holds.\")")
    assert repr(KafkaTimeoutError("metadata after 60 s")) == (
        "KafkaTimeoutError('metadata after 60 s')")
    assert repr(ProducerClosedError()) == "ProducerClosedError('The producer is closed.')"
    e = ConfigError("invalid value", key="acks", value="two")
    assert repr(e) == "ConfigError(\"acks: invalid value; got 'two'\")"
    assert repr(for_code(9999)("x")).startswith("UnknownCode9999Error('UNKNOWN_CODE_9999 (9999)")


def _public_modules() -> list[str]:
    """Every importable module of sdk a user may reach: no private (_x) modules, no generated
    protocol classes, no CLI (a program: its errors end as exit messages)."""
    import pkgutil

    import sdk

    names = []
    for info in pkgutil.walk_packages(sdk.__path__, "sdk."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "cli" or \
                info.name.startswith("sdk.protocol.messages"):
            continue
        names.append(info.name)
    return names


def test_every_public_exception_is_importable_from_sdk_errors() -> None:
    import importlib

    modules = _public_modules()
    assert {"sdk.admin.results", "sdk.consumer.errors", "sdk.spark.errors"} <= set(modules)
    missing: dict[str, str] = {}
    found = 0
    for name in modules:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("_") or not (isinstance(value, type)
                                            and issubclass(value, BaseException)):
                continue
            if not value.__module__.startswith("sdk"):
                continue  # a builtin or a third party's
            found += 1
            if getattr(errors, value.__name__, None) is not value:
                missing[value.__name__] = name
    assert found > 100
    assert not missing, missing
    for cls in (errors.ItemsFailedError, errors.CommitFailedError, errors.DataLossError,
                errors.RecordDeserializationError, errors.UnsupportedCompressionError):
        assert issubclass(cls, KafkaError)
