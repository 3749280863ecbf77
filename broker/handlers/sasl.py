"""SaslHandshake and SaslAuthenticate: a connection's SASL exchange (broker/security/sasl.py has
the mechanisms and says what is allowed before it ends).

After a failure the response goes out `connection.failed.authentication.delay.ms` late
(Kafka's 100 ms, which slows password guessing) and the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..logging import get_logger
from ..security.sasl import AuthenticationFailed
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
    from ottla.protocol.views.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

log = get_logger("ottla.sasl")


def handle_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    sasl = session.security.sasl
    enabled = list(sasl.mechanisms) if sasl is not None else []
    if sasl is None:
        # Not a SASL listener: Kafka answers ILLEGAL_SASL_STATE and goes on.
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": enabled}
    if session.authenticated and (ctx.version == 0 or not session.security.reauth_ms):
        # Only KIP-368 re-authentication (handshake v1+) may start a second exchange; an
        # authenticated connection is answered as Kafka's KafkaApis does: ILLEGAL_SASL_STATE,
        # no mechanisms, and the connection goes on.
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    mechanism = request.mechanism
    if mechanism not in enabled or (session.authenticated and mechanism != session.mechanism):
        log.warning("sasl mechanism refused", mechanism=mechanism[:64], enabled=enabled, peer=ctx.peer)
        session.close_after_response = True
        return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled}
    session.start(mechanism, ctx.services.scram)
    # Handshake v0: the tokens follow as bare frames instead of SaslAuthenticate.
    session.raw_tokens = ctx.version == 0
    return {"error_code": ErrorCode.none, "mechanisms": enabled}


async def handle_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.session
    if session.authenticated and session.server is None:
        # After a successful exchange: Kafka's KafkaApis answers it and goes on.
        return {"error_code": ErrorCode.illegal_sasl_state, "auth_bytes": b"",
                "error_message": "SaslAuthenticate request received after successful authentication",
                "session_lifetime": 0}
    if session.server is None or session.raw_tokens:
        # On a SASL listener this breaks the exchange; on a plaintext one Kafka's
        # KafkaApis answers it and the connection goes on.
        session.close_after_response = session.security.sasl is not None
        return {"error_code": ErrorCode.illegal_sasl_state, "auth_bytes": b"",
                "error_message": "SaslAuthenticate without a SaslHandshake first", "session_lifetime": 0}
    try:
        challenge, lifetime = session.respond_to(bytes(request.auth_bytes), ctx.services.security_events, ctx.peer)
    except AuthenticationFailed as exc:
        await asyncio.sleep(session.security.failed_auth_delay_ms / 1000)
        return {"error_code": ErrorCode.sasl_authentication_failed, "error_message": str(exc), "auth_bytes": b"",
                "session_lifetime": 0}
    return {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": challenge,
            "session_lifetime": lifetime}
