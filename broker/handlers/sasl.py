"""SaslHandshake (17) and SaslAuthenticate (36): the broker side of Kafka's SASL exchange.

The decisions are broker/net/sasl_state.py's; these handlers carry them on the
wire. On a listener without SASL, or after authentication, both answer
ILLEGAL_SASL_STATE (34), as Kafka does (re-authentication, KIP-368, is not
supported: `connections.max.reauth.ms` must stay 0 and SessionLifetimeMs is 0).
"""

from __future__ import annotations

import structlog

from raftka.broker.context import BrokerContext
from raftka.broker.net.sasl_state import DONE, SaslAuthenticator
from raftka.client.protocol import ErrorCode, response_class
from raftka.client.protocol.api_keys import ApiKey

log = structlog.get_logger("broker.sasl")

SaslHandshakeResponse = response_class(ApiKey.SASL_HANDSHAKE)
SaslAuthenticateResponse = response_class(ApiKey.SASL_AUTHENTICATE)


async def handle_sasl_handshake(ctx: BrokerContext, header, request, conn=None):
    auth = conn.authenticator if conn is not None else None
    if not isinstance(auth, SaslAuthenticator):
        mechanisms = list(ctx.config.security.listener(conn.listener).sasl_mechanisms) if conn else []
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms)
    code, mechanisms = auth.handshake(request.mechanism)
    if code:
        log.info("sasl.mechanism_refused", peer=conn.peer, listener=conn.listener, mechanism=request.mechanism,
                 enabled=mechanisms)
    return SaslHandshakeResponse(error_code=code, mechanisms=mechanisms)


async def handle_sasl_authenticate(ctx: BrokerContext, header, request, conn=None):
    auth = conn.authenticator if conn is not None else None
    if not isinstance(auth, SaslAuthenticator):
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received after successful authentication",
                                        auth_bytes=b"")
    code, message, token = auth.authenticate(request.auth_bytes)
    if code:
        log.info("sasl.authentication_failed", peer=conn.peer, listener=conn.listener, mechanism=auth.mechanism)
    elif auth.state == DONE:
        conn.principal = auth.principal
        conn.authenticator = None
        log.info("sasl.authenticated", peer=conn.peer, listener=conn.listener, mechanism=auth.mechanism,
                 principal=auth.principal, version=header.api_version)
    return SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=token, session_lifetime_ms=0)
