"""ListOffsets: earliest (-2), latest (-1: the high watermark for consumers, the last stable offset
for read_committed ones), max timestamp (-3, KIP-734: broker/replication/max_timestamp.py), earliest local
(-4, KIP-405: the log start offset, as no segment is ever tiered), latest tiered (-5, KIP-1005:
-1, Kafka's answer for a topic without remote storage), earliest pending upload (-6, KIP-1023:
-1, likewise), or by timestamp.

As Kafka 4.4 answers (run against it: tests/differential/wire_steps.py), each special timestamp
needs the version that introduced it (-3 v7, -4 v8, -5 v9, -6 v11) and any other negative one
is refused: UNSUPPORTED_VERSION for that partition. A consumer never gets an offset at or past
its high watermark (last stable offset for read_committed) except for -2 and -4, and v10's
`timeout_ms` (for remote reads) has nothing to wait for. The lookups by timestamp
and max timestamp locate their batch on the event loop (in-memory indexes, a few headers) and
read and decode it in a worker thread, under the partition's lock (ReplicaManager.read_log)."""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.replication.max_timestamp import (
    batch_with_max_timestamp,
    record_with_max_timestamp,
)
from raftka.client.protocol import ErrorCode, ListOffsetsResponse
from raftka.raft_meta.security.acls import AclOperation

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1
# The first version that may ask each special timestamp (Kafka 4.4's ListOffsets check).
FIRST_VERSION_OF = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                    EARLIEST_PENDING_UPLOAD: 11}
UNSERVED = float("inf")


def timestamp_supported(version: int, timestamp: int) -> bool:
    """False for a special timestamp newer than the request version, and any other negative one."""
    return timestamp >= 0 or version >= FIRST_VERSION_OF.get(timestamp, UNSERVED)


def _epoch_of(partition, offset: int) -> int:
    """The leader epoch that wrote `offset` (-1 if unknown)."""
    epoch = -1
    for entry_epoch, start in partition.log.epoch_cache.entries():
        if start <= offset:
            epoch = entry_epoch
    return epoch


async def _lookup(ctx, version: int, request, name: str, req_part, denied: frozenset[str] = frozenset()) -> dict:
    result = {"partition_index": req_part.partition_index, "error_code": 0, "timestamp": -1,
              "offset": -1, "leader_epoch": -1}
    try:
        if name in denied:
            raise acl_checks.topic_denied_error(name)
        if not timestamp_supported(version, req_part.timestamp):
            result["error_code"] = ErrorCode.UNSUPPORTED_VERSION
            return _with_old_style(result, req_part)
        partition = ctx.replicas.get_leader(name, req_part.partition_index, req_part.current_leader_epoch)
        consumer = request.replica_id < 0
        visible = (partition.log_end_offset if not consumer
                   else partition.last_stable_offset if request.isolation_level == READ_COMMITTED  # v2+
                   else partition.high_watermark)
        epoch = None  # the epoch that wrote the offset found, unless the lookup names it
        if req_part.timestamp in (EARLIEST, EARLIEST_LOCAL):
            result["offset"] = partition.log.log_start_offset
        elif req_part.timestamp == LATEST:
            result["offset"] = visible
        elif req_part.timestamp == MAX_TIMESTAMP:
            found = await ctx.replicas.read_log(partition, batch_with_max_timestamp,
                                                lambda located: record_with_max_timestamp(*located))
            if found is not None and found.offset < visible:
                result["offset"], result["timestamp"], epoch = found.offset, found.timestamp, found.leader_epoch
        elif req_part.timestamp not in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            target = req_part.timestamp
            found = await ctx.replicas.read_log(partition, lambda log: log.batch_for_timestamp(target),
                                                lambda located: partition.log.record_for_timestamp(*located, target))
            if found is not None and found[0] < visible:
                result["offset"], result["timestamp"] = found
        if result["offset"] >= 0:
            result["leader_epoch"] = _epoch_of(partition, result["offset"]) if epoch is None else epoch
    except Exception as exc:
        result["error_code"] = error_code_for(exc)
    return _with_old_style(result, req_part)


def _with_old_style(result: dict, req_part) -> dict:
    """v0 answers a list (Kafka's "offsets before"): raftka gives the one offset the later
    versions give, when there is one and max_num_offsets allows it (docs/compatibility.md)."""
    result["old_style_offsets"] = [result["offset"]] if result["offset"] >= 0 and req_part.max_num_offsets > 0 else []
    return result


async def handle(ctx: BrokerContext, header, request, conn=None) -> ListOffsetsResponse:
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, (t.name for t in request.topics))
    topics = [
        {"name": t.name, "partitions": [await _lookup(ctx, header.api_version, request, t.name, p, denied)
                                        for p in t.partitions]}
        for t in request.topics
    ]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
