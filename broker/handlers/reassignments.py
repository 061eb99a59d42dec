"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455.

Alter goes to the active controller as one user operation (raft_meta/controller/reassignment_decisions.py
decides; one metadata entry commits every partition's change) and answers per
partition; the move itself then happens in the background: the adding replicas fetch
and catch up, and the controller finishes the reassignment when they are all in the
ISR. List answers from this broker's metadata image (every broker applies the same
committed records; Kafka asks the controller, which is at most a few records ahead).

ACLs as Kafka: ALTER on the CLUSTER for Alter, DESCRIBE on the CLUSTER for List.
"""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import error_code_named, response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.raft_meta.controller.reassignment_decisions import list_partition_reassignments
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

AlterPartitionReassignmentsResponse = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
ListPartitionReassignmentsResponse = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)


def _by_topic(rows: list[tuple[str, dict]]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for name, partition in rows:
        topics.setdefault(name, []).append(partition)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def handle_alter(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.ALTER)
    if denied:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=denied, error_message="not authorized to ALTER the cluster", responses=[])
    asked = [(t.name, p.partition_index, p.replicas) for t in request.topics for p in t.partitions]
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    if not asked:
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=[])
    try:
        results = await ctx.controller.alter_partition_reassignments(asked, allow_rf_change, request.timeout_ms)
    except Exception as exc:  # the whole request: NOT_CONTROLLER, REQUEST_TIMED_OUT, POLICY_VIOLATION, ...
        code = error_code_for(exc)
        message = getattr(exc, "message", str(exc))
        log.warning("partition.reassignment_refused", partitions=len(asked), error_code=code, reason=message)
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                                   responses=[])
    rows = []
    for topic, partition, error, message in results:
        code = 0 if error is None else error_code_named(error)
        rows.append((topic, {"partition_index": partition, "error_code": code, "error_message": message}))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                               responses=_by_topic(rows))


async def handle_list(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE)
    if denied:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=denied, error_message="not authorized to DESCRIBE the cluster", topics=[])
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, index) for t in request.topics for index in t.partition_indexes]
    rows = [(r.topic, {"partition_index": r.partition, "replicas": list(r.replicas),
                       "adding_replicas": list(r.adding_replicas), "removing_replicas": list(r.removing_replicas)})
            for r in list_partition_reassignments(ctx.image, wanted)]
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                              topics=_by_topic(rows))
