"""Version negotiation: the highest version both sides support, per API key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sdk.errors import UnsupportedVersionError
from sdk.protocol.messages import API_TABLE, ApiKey

if TYPE_CHECKING:  # the codec module is only imported when a connection needs it
    from sdk.protocol.messages.api_versions import ApiVersionsResponse

VersionRanges = Mapping[int, tuple[int, int]]


# Versions the codecs know but the SDK's request builders do not fill yet: these name topics
# by id only (Produce v13, OffsetCommit and OffsetFetch v10) and the builders send names, so
# negotiation stays below them until the builders learn topic ids.
_BUILDER_CAPS: dict[int, int] = {ApiKey.PRODUCE: 12, ApiKey.OFFSET_COMMIT: 9,
                                 ApiKey.OFFSET_FETCH: 9}


def our_versions() -> dict[int, tuple[int, int]]:
    """Every API key with the versions we can encode (unstable top versions left out)."""
    return {key: (row[3], min(row[5], _BUILDER_CAPS.get(key, row[5])))
            for key, row in API_TABLE.items()}


def ranges_from_response(
    api_keys: list[ApiVersionsResponse.ApiVersion],
) -> dict[int, tuple[int, int]]:
    """Turn ``ApiVersionsResponse.api_keys`` into ``{api_key: (min, max)}``."""
    return {k.api_key: (k.min_version, k.max_version) for k in api_keys}


def api_name(api_key: int) -> str:
    try:
        return f"{ApiKey(api_key).name} (API key {api_key})"
    except ValueError:
        return f"API key {api_key}"


def pick_version(api_key: int, broker: VersionRanges, ours: VersionRanges | None = None,
                 cap: int | None = None) -> int:
    """The highest version in both ranges (and at most ``cap``), or UnsupportedVersionError."""
    theirs = broker.get(api_key)
    mine = (ours or our_versions()).get(api_key)
    if theirs is None or mine is None:
        side = "broker" if theirs is None else "client"
        raise UnsupportedVersionError(f"{api_name(api_key)} is not supported by the {side}")
    hi = min(theirs[1], mine[1], cap if cap is not None else mine[1])
    lo = max(theirs[0], mine[0])
    if hi < lo:
        raise UnsupportedVersionError(
            f"{api_name(api_key)}: broker supports {theirs[0]}-{theirs[1]}, "
            f"client {mine[0]}-{mine[1]}" + (f" (capped at {cap})" if cap is not None else "")
        )
    return hi


def negotiate(broker: VersionRanges, ours: VersionRanges | None = None) -> dict[int, int]:
    """Highest common version of every API key both sides know; keys without one are left out."""
    mine = ours or our_versions()
    out: dict[int, int] = {}
    for key, (lo, hi) in broker.items():
        if key in mine:
            top = min(hi, mine[key][1])
            if top >= max(lo, mine[key][0]):
                out[key] = top
    return out
