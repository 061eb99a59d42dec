"""DeleteRecords: move partitions' log start offsets forward, on the leader and its followers.

Kafka's rules: the request goes to each partition's leader; offset -1 means the high
watermark; an offset below 0 or above the high watermark is OFFSET_OUT_OF_RANGE. The leader
moves its log start (whole segments below it are deleted; the log-start checkpoint keeps it
across restarts); followers learn the new log start from their next fetch and move theirs.
The answer waits, like Kafka's DelayedDeleteRecords, until the partition's low watermark
(the lowest log start of the leader and its live followers) reaches the offset, or the
request's timeout (REQUEST_TIMED_OUT; the deletion itself stands). Partitions are handled
concurrently, each with its own error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

DeleteRecordsResponse = response_class(ApiKey.DELETE_RECORDS)
HIGH_WATERMARK = -1
DEFAULT_TIMEOUT_MS = 30_000  # a request with timeout_ms <= 0


def low_watermark(leader_log_start: int, follower_log_starts: Mapping[int, int], replicas: Iterable[int],
                  leader_id: int, is_live: Callable[[int], bool]) -> int:
    """Kafka's lowWatermarkIfLeader: the lowest log start among the leader and its live
    followers (one not heard from yet counts as -1, i.e. not there yet)."""
    low = leader_log_start
    for replica in replicas:
        if replica != leader_id and is_live(replica):
            low = min(low, follower_log_starts.get(replica, -1))
    return low


def target_offset(requested: int, high_watermark: int) -> int | None:
    """The new log start for a requested offset, or None when it is out of range."""
    offset = high_watermark if requested == HIGH_WATERMARK else requested
    return offset if 0 <= offset <= high_watermark else None


async def _delete_one(ctx, topic: str, index: int, requested: int, deadline: float) -> dict:
    def answer(code: int, low: int = -1) -> dict:
        return {"partition_index": index, "low_watermark": low, "error_code": int(code)}

    try:
        partition = ctx.replicas.get_leader(topic, index)
    except Exception as exc:
        return answer(error_code_for(exc))
    offset = target_offset(requested, partition.high_watermark)
    if offset is None:
        return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        await ctx.replicas.delete_records(partition, offset)
    except Exception as exc:
        return answer(error_code_for(exc))
    log.info("records.deleted", topic=topic, partition=index, log_start_offset=partition.log.log_start_offset)

    def low() -> int:
        return low_watermark(partition.log.log_start_offset, partition.follower_log_starts, partition.replicas,
                             partition.local_id, ctx.image.is_live)

    with trio.move_on_at(deadline):
        while low() < offset:
            if not partition.is_leader:
                return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            await partition.log_start_changed.wait()
        return answer(0, low())
    return answer(ErrorCode.REQUEST_TIMED_OUT, low())


async def handle(ctx: BrokerContext, header, request, conn=None):
    timeout_ms = request.timeout_ms if request.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
    deadline = trio.current_time() + timeout_ms / 1000.0
    jobs = [(t.name, p.partition_index, p.offset) for t in request.topics for p in t.partitions]
    results: dict[int, dict] = {}

    denied = acl_checks.topics_denied(ctx, conn, AclOperation.DELETE, {t for t, _, _ in jobs})

    async def run(i: int, topic: str, index: int, offset: int) -> None:
        if topic in denied:
            results[i] = {"partition_index": index, "low_watermark": -1,
                          "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            return
        results[i] = await _delete_one(ctx, topic, index, offset, deadline)

    async with trio.open_nursery() as nursery:
        for i, (topic, index, offset) in enumerate(jobs):
            nursery.start_soon(run, i, topic, index, offset)
    by_topic: dict[str, list[dict]] = {}
    for i, (topic, _, _) in enumerate(jobs):
        by_topic.setdefault(topic, []).append(results[i])
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in by_topic.items()])
