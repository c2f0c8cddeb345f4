"""SaslHandshake and SaslAuthenticate outside an authentication exchange.

The exchange itself is run by the connection's gate (``server_ref.security.sasl``) before
requests reach handlers. What arrives here is a SaslHandshake or SaslAuthenticate on a
listener without SASL, or after authentication on a connection with no session lifetime
(no re-authentication possible) or less than a second after its last re-authentication
began: Kafka answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from sdk.errors import IllegalSaslStateError
from sdk.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from sdk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from server_ref.handlers import RequestContext, handles


@handles(17, 0, 1)
def sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=IllegalSaslStateError.errno, mechanisms=[])


@handles(36, 0, 2)
def sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest
                      ) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=IllegalSaslStateError.errno,
        error_message="SaslAuthenticate request received after successful authentication")
