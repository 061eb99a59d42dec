"""DescribeAcls, CreateAcls, DeleteAcls (keys 29-31): ACLs kept in the metadata log.

Without an authorizer (`authorizer.class.name` empty) all three answer SECURITY_DISABLED (54),
as Kafka does. DescribeAcls needs DESCRIBE on the cluster, the other two ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise). Creations and deletions are decided by the active
controller (raft_meta/security/acls.py) and committed as one metadata entry per request; the answer
comes once committed. Invalid ACLs and filters get INVALID_REQUEST each, the rest go on.

Every version (v0-3) takes every resource type, USER (v3's addition) included, as Kafka 4.4
does; v2+ are the flexible encoding.
"""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import ErrorCode, response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    binding_error,
    check_request_size,
    filter_error,
    matching,
)

log = structlog.get_logger("broker.acls")

DescribeAclsResponse = response_class(ApiKey.DESCRIBE_ACLS)
CreateAclsResponse = response_class(ApiKey.CREATE_ACLS)
DeleteAclsResponse = response_class(ApiKey.DELETE_ACLS)

DISABLED_MESSAGE = "no authorizer is configured on the broker (authorizer.class.name is empty)"
# Kafka 4.4 answers a successful DescribeAcls, and each ACL CreateAcls made, with an empty
# message (not null); DeleteAcls' results with null.
NO_ERROR_MESSAGE = ""


def _refusal(ctx, conn, op: AclOperation) -> tuple[int, str] | None:
    if not acl_checks.enabled(ctx):
        return int(ErrorCode.SECURITY_DISABLED), DISABLED_MESSAGE
    if not acl_checks.cluster_allowed(ctx, conn, op):
        return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), f"not authorized to {op.name} the cluster's ACLs"
    return None


def _code(name: str) -> int:
    try:
        return int(ErrorCode[name])
    except KeyError:
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def _filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


async def handle_describe_acls(ctx: BrokerContext, header, request, conn=None):
    def answer(code: int, message: str | None, resources: list) -> object:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=resources)

    refusal = _refusal(ctx, conn, AclOperation.DESCRIBE)
    if refusal is not None:
        return answer(*refusal, [])
    f = _filter(request)
    problem = filter_error(f)
    if problem is not None:
        return answer(int(ErrorCode.INVALID_REQUEST), problem, [])
    resources: dict[tuple[int, str, int], list[dict]] = {}
    for _, b in matching(ctx.image.acls, f):
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission_type})
    return answer(0, NO_ERROR_MESSAGE, [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": entries}
                            for (rt, name, pt), entries in resources.items()])


async def handle_create_acls(ctx: BrokerContext, header, request, conn=None):
    refusal = _refusal(ctx, conn, AclOperation.ALTER)
    results: list[tuple[int, str | None]] = [(0, NO_ERROR_MESSAGE)] * len(request.creations)
    if refusal is not None:
        results = [refusal] * len(request.creations)
    else:
        asked: list[tuple[int, AclBinding]] = []
        for i, c in enumerate(request.creations):
            b = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type)
            problem = binding_error(b)
            if problem is not None:
                results[i] = (int(ErrorCode.INVALID_REQUEST), problem)
            else:
                asked.append((i, b))
        if asked:
            try:
                check_request_size((b for _, b in asked), "this CreateAcls request")
                outcomes = await ctx.controller.create_acls([b.to_wire() for _, b in asked])
            except Exception as exc:  # the whole request: NOT_CONTROLLER, REQUEST_TIMED_OUT, POLICY_VIOLATION
                message = exc.message if isinstance(exc, ControllerError) else str(exc)
                for i, _ in asked:
                    results[i] = (error_code_for(exc), message)
                log.warning("acls.create_failed", acls=len(asked), error=message)
            else:
                for (i, b), (error, message) in zip(asked, outcomes, strict=True):
                    results[i] = (0, NO_ERROR_MESSAGE) if error is None else (_code(error), message)
                    if error is None:
                        log.info("acl.created", acl=b.describe(), by=acl_checks.caller(conn)[0])
    return CreateAclsResponse(throttle_time_ms=0, results=[
        {"error_code": code, "error_message": message} for code, message in results])


async def handle_delete_acls(ctx: BrokerContext, header, request, conn=None):
    refusal = _refusal(ctx, conn, AclOperation.ALTER)
    filters = [_filter(f) for f in request.filters]
    results: list[dict] = [{"error_code": 0, "error_message": None, "matching_acls": []} for _ in filters]
    if refusal is not None:
        for r in results:
            r["error_code"], r["error_message"] = refusal
    else:
        asked = []
        for i, f in enumerate(filters):
            problem = filter_error(f)
            if problem is not None:
                results[i].update(error_code=int(ErrorCode.INVALID_REQUEST), error_message=problem)
            else:
                asked.append((i, f))
        if asked:
            try:
                check_request_size((f for _, f in asked), "this DeleteAcls request")
                outcomes = await ctx.controller.delete_acls([f.to_wire() for _, f in asked])
            except Exception as exc:
                message = exc.message if isinstance(exc, ControllerError) else str(exc)
                for i, _ in asked:
                    results[i].update(error_code=error_code_for(exc), error_message=message)
                log.warning("acls.delete_failed", filters=len(asked), error=message)
            else:
                for (i, _), outcome in zip(asked, outcomes, strict=True):
                    if outcome["error"] is not None:
                        results[i].update(error_code=_code(outcome["error"][0]), error_message=outcome["error"][1])
                        continue
                    deleted = [AclBinding.from_wire(w) for w in outcome["deleted"]]
                    for b in deleted:
                        log.info("acl.deleted", acl=b.describe(), by=acl_checks.caller(conn)[0])
                    results[i]["matching_acls"] = [
                        {"error_code": 0, "error_message": None, "resource_type": b.resource_type,
                         "resource_name": b.resource_name, "pattern_type": b.pattern_type, "principal": b.principal,
                         "host": b.host, "operation": b.operation, "permission_type": b.permission_type}
                        for b in deleted]
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
