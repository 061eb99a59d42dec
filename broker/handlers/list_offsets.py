"""ListOffsets: earliest (-2), latest (-1: the high watermark for consumers, the last stable offset
for read_committed ones), or by timestamp."""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.errors import error_code_for
from raftka.client.protocol import ListOffsetsResponse
from raftka.raft_meta.acls import AclOperation

EARLIEST = -2
LATEST = -1
READ_COMMITTED = 1


def _epoch_of(partition, offset: int) -> int:
    """The leader epoch that wrote `offset` (-1 if unknown)."""
    epoch = -1
    for entry_epoch, start in partition.log.epoch_cache.entries():
        if start <= offset:
            epoch = entry_epoch
    return epoch


def _lookup(ctx, request, name: str, req_part, denied: frozenset[str] = frozenset()) -> dict:
    result = {"partition_index": req_part.partition_index, "error_code": 0, "timestamp": -1,
              "offset": -1, "leader_epoch": -1}
    try:
        if name in denied:
            raise acl_checks.topic_denied_error(name)
        partition = ctx.replicas.get_leader(name, req_part.partition_index, req_part.current_leader_epoch)
        consumer = request.replica_id < 0
        if req_part.timestamp == EARLIEST:
            result["offset"] = partition.log.log_start_offset
        elif req_part.timestamp == LATEST:
            if not consumer:
                result["offset"] = partition.log_end_offset
            elif request.isolation_level == READ_COMMITTED:  # v2+; v0-1 decode it as 0
                result["offset"] = partition.last_stable_offset
            else:
                result["offset"] = partition.high_watermark
        else:
            found = partition.log.offset_for_timestamp(req_part.timestamp)
            if found is not None and (not consumer or found[0] < partition.high_watermark):
                result["offset"], result["timestamp"] = found
        if result["offset"] >= 0:
            result["leader_epoch"] = _epoch_of(partition, result["offset"])
    except Exception as exc:
        result["error_code"] = error_code_for(exc)
    # v0 answers a list (Kafka's "offsets before"): raftka gives the one offset the later
    # versions give, when there is one and max_num_offsets allows it (docs/compatibility.md).
    result["old_style_offsets"] = [result["offset"]] if result["offset"] >= 0 and req_part.max_num_offsets > 0 else []
    return result


async def handle(ctx, header, request, conn=None) -> ListOffsetsResponse:
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, (t.name for t in request.topics))
    topics = [
        {"name": t.name, "partitions": [_lookup(ctx, request, t.name, p, denied) for p in t.partitions]}
        for t in request.topics
    ]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
