"""Fetch: whole batches as byte ranges of segment files, long-polled.

Consumers (replica_id < 0) read only below the high watermark. A follower
(replica_id = its broker id) reads up to the log end, and its fetch offset
tells the leader how far its log reaches (which advances the high watermark
and keeps it in the ISR). The response is built, and if it holds fewer than
`min_bytes` and no error, the request waits (up to `max_wait_ms`) for a
high-watermark move (consumers) or an append (followers), then is built
again. Fetch sessions are not supported: `session_id` is 0.
"""

from __future__ import annotations

import trio

from broker.errors import error_code_for
from broker.zero_copy import FileRegion
from client.protocol import ErrorCode, FetchResponse


def _build(ctx, request, record_follower: bool) -> tuple[list[dict], int, bool]:
    """(topic responses, total record bytes, any error)."""
    follower = request.replica_id >= 0
    remaining = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    total = 0
    any_error = False
    topics = []
    for ftopic in request.topics:
        parts = []
        for fpart in ftopic.partitions:
            entry = {"partition_index": fpart.partition, "error_code": 0, "high_watermark": -1,
                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                     "preferred_read_replica": -1, "records": b""}
            try:
                partition = ctx.replicas.get_leader(ftopic.topic, fpart.partition,
                                                    fpart.current_leader_epoch)
                if follower and record_follower:
                    ctx.replicas.record_follower_fetch(partition, request.replica_id, fpart.fetch_offset)
                entry["high_watermark"] = partition.high_watermark
                entry["last_stable_offset"] = partition.high_watermark
                entry["log_start_offset"] = partition.log.log_start_offset
                if remaining > 0:
                    # The first partition with data may exceed max_bytes by one batch (Kafka's rule).
                    limit = min(fpart.partition_max_bytes, remaining)
                    info = partition.read(fpart.fetch_offset, limit, committed_only=not follower)
                    # Only the first partition with data may go over the limit (one whole batch).
                    if info.size and (total == 0 or info.size <= limit):
                        entry["records"] = FileRegion(info.slices)  # sent with sendfile
                        remaining -= info.size
                        total += info.size
                elif not (partition.log.log_start_offset <= fpart.fetch_offset <= partition.log_end_offset):
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            except Exception as exc:
                entry["error_code"] = error_code_for(exc)
            if entry["error_code"]:
                any_error = True
            parts.append(entry)
        topics.append({"topic": ftopic.topic, "partitions": parts})
    return topics, total, any_error


async def handle(ctx, header, request, conn=None) -> FetchResponse:
    deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000.0
    follower = request.replica_id >= 0
    first = True
    while True:
        # Taken before reading, so no wake-up is missed.
        event = ctx.replicas.append_event() if follower else ctx.replicas.data_event()
        topics, total, any_error = _build(ctx, request, record_follower=first)
        first = False
        if total >= request.min_bytes or any_error or trio.current_time() >= deadline:
            break
        with trio.move_on_at(deadline):
            await event.wait()
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
