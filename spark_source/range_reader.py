"""The source's executor side: one offset range of one partition read as Arrow batches.

Range reads fetch raw partition bytes (Fetch with `kafka.isolation.level`:
read_uncommitted by default, as Spark; the broker serves consumers only offsets
below the high watermark, so every byte read is replicated; read_committed
stops at the last stable offset and drops aborted transactions) and hand them
to `arrow_records.decode_range`. They
use the SDK's `Cluster` (connections, metadata, leader routing) rather than
`AsyncConsumer.poll`, because the consumer turns every record into Python
objects, which would cost more than the whole rest of a Spark read.

Executors stream a range from a thread (`iter_range_batches`) so fetching
overlaps with Spark consuming the previous Arrow batch.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Awaitable, Callable, Iterator

import pyarrow as pa
import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, error_for_code
from raftka.client.protocol import ApiKey, ErrorCode, FetchRequest
from raftka.client.records import TopicPartition
from raftka.spark_source.arrow_records import decode_range, scan_range
from raftka.spark_source.log_reader import (
    SourceError,
    data_loss,
    list_offsets,
    log,
    run_with_cluster,
)
from raftka.spark_source.offset_ranges import OffsetRange
from raftka.spark_source.options import EARLIEST, SourceOptions


class _ReaderGone(Exception):
    """The consumer of `iter_range_batches` closed it: stop fetching."""


async def read_range(cluster: Cluster, options: SourceOptions, rng: OffsetRange,
                     emit: Callable[[pa.RecordBatch], Awaitable[None]]) -> None:
    """Fetch [rng.start, rng.end) of one partition and `emit` it as Arrow batches.

    One task fetches, the caller's task decodes (on a worker thread, so the
    loop keeps reading the socket): the broker prepares the next answer while
    this one is decoded. Offsets below the log start (deleted by retention)
    and a deleted partition are data loss (DataLossError, or skipped with
    failOnDataLoss=false). Leader moves and timeouts are retried until
    kafka.request.timeout.ms passes without progress.
    """
    send, receive = trio.open_memory_channel[tuple[int, bytes, list | None]](1)

    async def decode_all() -> None:
        async with receive:
            async for fetch_offset, records, aborted in receive:
                decoded = await trio.to_thread.run_sync(functools.partial(
                    decode_range, rng.topic, rng.partition, records, fetch_offset, rng.end,
                    include_headers=options.include_headers, aborted=aborted))
                if decoded.batch is not None:
                    await emit(decoded.batch)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(decode_all)
            async with send:
                await _fetch_range(cluster, options, rng, send)
    except BaseExceptionGroup as group:
        # Users should see "offsets ... were deleted", not an exception group.
        raise _root_cause(group) from None


def _root_cause(group: BaseExceptionGroup) -> BaseException:
    """The first error in `group` that is not the cancellation it caused."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if not isinstance(exc, trio.Cancelled):
            return exc
    return group


async def _fetch_range(cluster: Cluster, options: SourceOptions, rng: OffsetRange,
                       send: trio.MemorySendChannel[tuple[int, bytes, list | None]]) -> None:
    tp = TopicPartition(rng.topic, rng.partition)
    offset = rng.start
    partition_max = options.max_partition_fetch_bytes
    idle_deadline = trio.current_time() + options.request_timeout_ms / 1000
    while offset < rng.end:
        if trio.current_time() > idle_deadline:
            raise SourceError(
                f"no progress reading {rng.topic}/{rng.partition} at offset {offset} (range "
                f"{rng.start}..{rng.end}) within kafka.request.timeout.ms="
                f"{options.request_timeout_ms}")
        leader = cluster.metadata.leader_for(tp)
        if leader is None:
            await cluster.refresh_metadata([rng.topic])
            if cluster.metadata.partitions_for(rng.topic) is None \
                    or rng.partition not in (cluster.metadata.partitions_for(rng.topic) or ()):
                code = cluster.metadata.topic_errors.get(rng.topic)
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    data_loss(options, f"{rng.topic}/{rng.partition} was deleted before "
                                       f"offsets {offset}..{rng.end} were read")
                    return
            leader = cluster.metadata.leader_for(tp)
            if leader is None:  # no leader elected yet: wait before asking again
                await trio.sleep(cluster.retry_backoff)
                continue
        request = FetchRequest(
            replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=options.fetch_max_bytes,
            isolation_level=options.isolation_level, topics=[{"topic": rng.topic, "partitions": [{
                "partition": rng.partition, "fetch_offset": offset,
                "partition_max_bytes": partition_max}]}])
        try:
            response = await cluster.send_to(leader, ApiKey.FETCH, request)
        except KafkaConnectionError as exc:
            log.info("spark_source.fetch_failed", topic=rng.topic, partition=rng.partition,
                     error=str(exc))
            cluster.mark_leader_unknown([tp])
            await trio.sleep(cluster.retry_backoff)
            continue
        part = response.responses[0].partitions[0]
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            earliest = (await list_offsets(cluster, {tp: EARLIEST}))[tp]
            if earliest > offset:
                data_loss(options, f"offsets {offset}..{min(earliest, rng.end)} of "
                                   f"{rng.topic}/{rng.partition} were deleted (the log now "
                                   f"starts at {earliest}) before they were read")
                offset = earliest
                continue
            await trio.sleep(cluster.retry_backoff)  # beyond the HW of a new leader: wait
            continue
        if part.error_code:
            error = error_for_code(part.error_code, f"fetching {rng.topic}/{rng.partition}")
            if error.invalid_metadata or error.retriable:
                cluster.mark_leader_unknown([tp])
                await trio.sleep(cluster.retry_backoff)
                continue
            raise error
        next_offset, partial = scan_range(part.records, offset)
        if next_offset > offset:
            aborted = None if not options.isolation_level else [
                (a.producer_id, a.first_offset) for a in (part.aborted_transactions or ())]
            await send.send((offset, part.records, aborted))
            offset = next_offset
            idle_deadline = trio.current_time() + options.request_timeout_ms / 1000
        elif partial:
            partition_max *= 2  # one batch is larger than the limit: ask for more
        else:
            # Nothing at `offset` yet: planned offsets are below the high watermark,
            # which a new leader may not have caught up to; wait for it.
            await trio.sleep(cluster.retry_backoff)


def iter_range_batches(options: SourceOptions, rng: OffsetRange, *, prefetch: int = 4
                       ) -> Iterator[pa.RecordBatch]:
    """Arrow batches of `rng`, fetched on a background thread up to `prefetch`
    batches ahead. Closing the iterator early stops the thread."""
    handoff: queue.Queue = queue.Queue(maxsize=prefetch)
    stop = threading.Event()
    done = object()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    async def emit(batch: pa.RecordBatch) -> None:
        if not await trio.to_thread.run_sync(put, batch):
            raise _ReaderGone

    def work() -> None:
        try:
            run_with_cluster(options, lambda cluster: read_range(cluster, options, rng, emit),
                             time_limit=False, topics=[rng.topic])
            put(done)
        except _ReaderGone:
            pass
        except BaseException as exc:  # handed to the consuming thread
            put(exc)

    thread = threading.Thread(target=work, name=f"raftka-read-{rng.topic}-{rng.partition}",
                              daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(timeout=options.request_timeout_ms / 1000)
