"""CommonConfig: kwargs and dotted-name mappings, and the errors for bad input."""

from __future__ import annotations

import pytest

from sdk.errors import ConfigError
from sdk.net.config import CommonConfig, parse_bootstrap_servers


def test_kwargs_and_dotted_mapping_give_the_same_config() -> None:
    a = CommonConfig.build(bootstrap_servers="h1:9092,h2:9093", request_timeout_ms=5000)
    b = CommonConfig.build({"bootstrap.servers": "h1:9092,h2:9093", "request.timeout.ms": "5000"})
    assert a.bootstrap_servers == b.bootstrap_servers == [("h1", 9092), ("h2", 9093)]
    assert a.request_timeout_ms == b.request_timeout_ms == 5000


def test_defaults_and_generated_client_id() -> None:
    cfg = CommonConfig.build(bootstrap_servers="localhost")
    assert cfg.bootstrap_servers == [("localhost", 9092)]
    assert cfg.client_id.startswith("kafka-sdk-")
    assert cfg.security_protocol == "PLAINTEXT"
    assert cfg.metadata_max_age_ms == 300_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a:1", [("a", 1)]),
        (" a:1 , b:2 ", [("a", 1), ("b", 2)]),
        ("[::1]:9093", [("::1", 9093)]),
        ("[::1]", [("::1", 9092)]),
        ("PLAINTEXT://h:5", [("h", 5)]),
        (["x:1", "y"], [("x", 1), ("y", 9092)]),
    ],
)
def test_bootstrap_server_forms(text: object, expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(text) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "a:b", "a:0", "a:70000", "::1:9092", ":9092", "[::1"])
def test_bad_bootstrap_servers_name_the_key(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        CommonConfig.build(bootstrap_servers=bad)
    assert info.value.key == "bootstrap_servers"
    assert "bootstrap_servers" in str(info.value)


def test_missing_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers: is required"):
        CommonConfig.build()


def test_unknown_key_suggests_the_close_match() -> None:
    with pytest.raises(ConfigError) as info:
        CommonConfig.build({"request.timout.ms": 1}, bootstrap_servers="h")
    assert info.value.key == "request.timout.ms"
    # in the form the user wrote: dotted for a dotted key, underscores for a keyword
    assert "did you mean request.timeout.ms?" in str(info.value)
    assert "request.timeout.ms" in info.value.allowed  # type: ignore[operator]
    with pytest.raises(ConfigError, match=r"did you mean request_timeout_ms\?"):
        CommonConfig.build(request_timout_ms=1, bootstrap_servers="h")


def test_conflicting_duplicate_key() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        CommonConfig.build({"client.id": "a"}, bootstrap_servers="h", client_id="b")
    same = CommonConfig.build({"client.id": "a"}, bootstrap_servers="h", client_id="a")
    assert same.client_id == "a"


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("request_timeout_ms", 0, "a number > 0"),
        ("retry_backoff_ms", -1, "a number >= 0"),
        ("retry_backoff_ms", "soon", "an integer"),
        ("retry_backoff_ms", True, "an integer"),
        ("security_protocol", "KERBEROS", "'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or 'SASL_SSL'"),
    ],
)
def test_invalid_values_name_key_value_and_allowed(key: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        CommonConfig.build(bootstrap_servers="h", **{key: value})
    err = info.value
    assert err.key == key
    assert err.value == value
    assert err.allowed == allowed
    assert f"{key}:" in str(err) and allowed in str(err)


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="mapping"):
        CommonConfig.build(["bootstrap.servers"])  # type: ignore[arg-type]


def test_role_configs_extend_it() -> None:
    class RoleConfig(CommonConfig):
        fetch_min_bytes: int = 1

    cfg = RoleConfig.build({"fetch.min.bytes": "7"}, bootstrap_servers="h")
    assert cfg.fetch_min_bytes == 7
    with pytest.raises(ConfigError, match="unknown setting for RoleConfig"):
        RoleConfig.build(bootstrap_servers="h", linger_ms=5)
