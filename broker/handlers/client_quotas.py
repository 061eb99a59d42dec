"""DescribeClientQuotas (48) and AlterClientQuotas (49), Kafka's way (KIP-546).

Describe answers from this broker's metadata image, matched as Kafka's ClientQuotasImage
does (raft_meta/controller/quota_decisions.py); it needs DESCRIBE_CONFIGS on the cluster. Alter goes to
the active controller, which validates every entry and commits the changes as ClientQuota
records; it needs ALTER_CONFIGS on the cluster. `validate_only` checks without committing.
"""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import ErrorCode, error_code_named, response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.controller.quota_decisions import (
    DescribeError,
    QuotaAlteration,
    describe_client_quotas,
)
from raftka.raft_meta.security.acls import AclOperation

DescribeResponse = response_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
AlterResponse = response_class(ApiKey.ALTER_CLIENT_QUOTAS)


def _entity(parts) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in parts]


async def handle_describe(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE_CONFIGS)
    if denied:
        return DescribeResponse(throttle_time_ms=0, error_code=denied,
                                error_message="not authorized to DESCRIBE_CONFIGS the cluster", entries=None)
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = describe_client_quotas(ctx.image.client_quotas, components, request.strict)
    except DescribeError as exc:
        return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode[exc.error], error_message=str(exc),
                                entries=None)
    return DescribeResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=[
        {"entity": _entity(entity), "values": [{"key": k, "value": v} for k, v in values.items()]}
        for entity, values in found])


async def handle_alter(ctx: BrokerContext, header, request, conn=None):
    entries = [tuple((e.entity_type, e.entity_name) for e in entry.entity) for entry in request.entries]
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.ALTER_CONFIGS)
    if denied:
        return AlterResponse(throttle_time_ms=0, entries=[
            {"error_code": denied, "error_message": "not authorized to ALTER_CONFIGS the cluster",
             "entity": _entity(parts)} for parts in entries])
    alterations = [QuotaAlteration(parts, tuple((op.key, None if op.remove else op.value) for op in entry.ops))
                   for parts, entry in zip(entries, request.entries, strict=True)]
    try:
        results = await ctx.controller.alter_client_quotas(alterations, bool(request.validate_only))
    except ControllerError as exc:
        code = error_code_for(exc)
        return AlterResponse(throttle_time_ms=0, entries=[
            {"error_code": code, "error_message": exc.message, "entity": _entity(parts)} for parts in entries])
    return AlterResponse(throttle_time_ms=0, entries=[
        {"error_code": 0 if r.error is None else error_code_named(r.error),
         "error_message": r.message, "entity": _entity(parts)}
        for parts, r in zip(entries, results, strict=True)])
