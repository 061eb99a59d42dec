"""InitProducerId for the idempotent producer; with a transactional id, the transaction
coordinator answers (broker/handlers/transactions.py)."""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.handlers import transactions
from raftka.client.protocol import InitProducerIdResponse

log = structlog.get_logger("broker.producer_ids")


async def handle(ctx: BrokerContext, header, request, conn=None) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return await transactions.handle_init_producer_id(ctx, header, request, conn)
    code = acl_checks.idempotent_write_error(ctx, conn)
    if code:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    try:
        producer_id = await ctx.producer_ids.next_id()
    except Exception as exc:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=error_code_for(exc),
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=0)
