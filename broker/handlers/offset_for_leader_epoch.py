"""OffsetForLeaderEpoch: the end offset of a leader epoch, for truncation on leader change."""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import OffsetForLeaderEpochResponse


def _answer(ctx, topic: str, req_part, denied: frozenset[str] = frozenset()) -> dict:
    result = {"error_code": 0, "partition": req_part.partition, "leader_epoch": -1, "end_offset": -1}
    try:
        if topic in denied:
            raise acl_checks.topic_denied_error(topic)
        partition = ctx.replicas.get_leader(topic, req_part.partition, req_part.current_leader_epoch)
        epoch, end = partition.log.epoch_cache.end_offset_for_epoch(
            req_part.leader_epoch, partition.log_end_offset
        )
        result["leader_epoch"], result["end_offset"] = epoch, end
    except Exception as exc:
        result["error_code"] = error_code_for(exc)
    return result


async def handle(ctx: BrokerContext, header, request, conn=None) -> OffsetForLeaderEpochResponse:
    denied = acl_checks.offset_for_leader_epoch_denied(ctx, conn, (t.topic for t in request.topics))
    return OffsetForLeaderEpochResponse(
        throttle_time_ms=0,
        topics=[{"topic": t.topic, "partitions": [_answer(ctx, t.topic, p, denied) for p in t.partitions]}
                for t in request.topics],
    )
