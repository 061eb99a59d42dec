"""UnregisterBroker (key 64), what `kafka-cluster unregister --id N` sends: the controller
removes the broker's registration (raft_meta/controller/unregistration_decisions.py). ACL as Kafka: ALTER
on the CLUSTER."""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

UnregisterBrokerResponse = response_class(ApiKey.UNREGISTER_BROKER)


async def handle(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.ALTER)
    if denied:
        return UnregisterBrokerResponse(throttle_time_ms=0, error_code=denied,
                                        error_message="not authorized to ALTER the cluster")
    try:
        await ctx.controller.unregister_broker(request.broker_id)
    except Exception as exc:  # BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER, REQUEST_TIMED_OUT, ...
        code = error_code_for(exc)
        message = getattr(exc, "message", str(exc))
        log.warning("broker.unregister_refused", broker_id=request.broker_id, error_code=code, reason=message)
        return UnregisterBrokerResponse(throttle_time_ms=0, error_code=code, error_message=message)
    log.info("broker.unregistered", broker_id=request.broker_id)
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=0, error_message=None)
