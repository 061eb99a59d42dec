"""ElectLeaders (preferred and unclean), decided and committed by the controller
(raft_meta/controller/controller_decisions.py::elect_leaders); errors per partition, as in Kafka."""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.controller.controller_decisions import PREFERRED_ELECTION
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

ElectLeadersResponse = response_class(ApiKey.ELECT_LEADERS)


async def handle(ctx: BrokerContext, header, request, conn=None):
    election_type = getattr(request, "election_type", PREFERRED_ELECTION)  # v0: preferred only
    partitions = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.ALTER)
    if denied:  # Kafka: ALTER on the cluster, else the whole request fails
        return ElectLeadersResponse(throttle_time_ms=0, error_code=denied, replica_election_results=[])
    try:
        results = await ctx.controller.elect_leaders(election_type, partitions, request.timeout_ms)
    except ControllerError as exc:  # the whole request: NOT_CONTROLLER, REQUEST_TIMED_OUT, POLICY_VIOLATION
        if partitions is None:
            return ElectLeadersResponse(throttle_time_ms=0, error_code=exc.code, replica_election_results=[])
        results = [(name, index, exc) for name, index in partitions]
    by_topic: dict[str, list[dict]] = {}
    elected = 0
    for name, index, error in results:
        elected += error is None
        by_topic.setdefault(name, []).append({
            "partition_id": index, "error_code": 0 if error is None else error_code_for(error),
            "error_message": None if error is None else error.message})
    if elected:
        log.info("leaders.elected", election_type="preferred" if election_type == PREFERRED_ELECTION else "unclean",
                 partitions=elected)
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        {"topic": name, "partition_result": parts} for name, parts in by_topic.items()])
