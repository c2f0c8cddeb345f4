"""ApiVersions: advertise exactly the API keys and version ranges registered by handlers."""

from __future__ import annotations

import re

from sdk.errors import InvalidRequestError, UnsupportedVersionError
from sdk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from server_ref.handlers import REGISTRY, RequestContext, handles
from server_ref.handlers.transactions import transaction_features

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised_versions() -> list[ApiVersionsResponse.ApiVersion]:
    return [
        ApiVersionsResponse.ApiVersion(api_key=r.api_key, min_version=r.min_version,
                                       max_version=r.max_version)
        for r in sorted(REGISTRY.values(), key=lambda r: r.api_key)
    ]


def unsupported_version_response() -> ApiVersionsResponse:
    """KIP-511: a v0 body with UNSUPPORTED_VERSION and our ranges, so the client can retry."""
    return ApiVersionsResponse(error_code=UnsupportedVersionError.errno,
                               api_keys=advertised_versions())


@handles(18, 0, 4)
def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(req.client_software_name)
        and _SOFTWARE.fullmatch(req.client_software_version)
    ):
        return ApiVersionsResponse(error_code=InvalidRequestError.errno)
    # v3+: the finalized transaction.version (2: transactions v2, KIP-890) as Kafka 4.x.
    return ApiVersionsResponse(api_keys=advertised_versions(), **transaction_features())
