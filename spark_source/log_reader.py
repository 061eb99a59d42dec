"""The source's I/O: topic discovery, offset lookups and range reads over the SDK's Cluster.

Range reads fetch raw partition bytes (Fetch with isolation READ_UNCOMMITTED;
the broker serves consumers only offsets below the high watermark, so every
byte read is committed) and hand them to `arrow_records.decode_range`. They
use the SDK's `Cluster` (connections, metadata, leader routing) rather than
`AsyncConsumer.poll`, because the consumer turns every record into Python
objects, which would cost more than the whole rest of a Spark read.

Driver-side calls are short `trio.run`s (`run_with_cluster`); executors
stream a range from a thread (`iter_range_batches`) so fetching overlaps
with Spark consuming the previous Arrow batch.
"""

from __future__ import annotations

import functools
import logging
import queue
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pyarrow as pa
import structlog
import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, error_for_code
from raftka.client.lifecycle import OwnedNursery
from raftka.client.list_offsets import list_offsets as list_offsets_by_leader
from raftka.client.protocol import ApiKey, ErrorCode, FetchRequest
from raftka.client.records import TopicPartition
from raftka.spark_source.arrow_records import decode_range, scan_range
from raftka.spark_source.offset_ranges import OffsetRange
from raftka.spark_source.options import EARLIEST, LATEST, SourceOptions

log = structlog.get_logger("raftka.spark_source")

if not structlog.is_configured():
    # Spark's Python workers import us without any logging setup; the SDK's
    # per-connection debug events would flood the executors' stderr.
    # Logs go to stderr: a worker's stdout is not ours to write on.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))

T = TypeVar("T")
TopicPartitionKey = tuple[str, int]


class SourceError(RuntimeError):
    """Something the user can act on: unknown topic, unreachable brokers..."""


class _ReaderGone(Exception):
    """The consumer of `iter_range_batches` closed it: stop fetching."""


class DataLossError(SourceError):
    """Requested offsets are gone (retention, deleted topic) and failOnDataLoss is true."""


def data_loss(options: SourceOptions, message: str) -> None:
    """Raise DataLossError, or log and carry on when failOnDataLoss is false."""
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost. If you want the query to skip lost "
            "data and carry on, set the option failOnDataLoss to 'false'.")
    log.warning("spark_source.data_loss_skipped", detail=message)


def run_with_cluster(options: SourceOptions, fn: Callable[[Cluster], Awaitable[T]], *,
                     time_limit: bool = True) -> T:
    """Run `fn(cluster)` on a fresh trio loop with a connected Cluster; unreachable
    bootstrap servers or a timeout (kafka.request.timeout.ms for connecting, and
    for the whole call with `time_limit`) become a SourceError naming the option."""
    timeout = options.request_timeout_ms / 1000

    async def main() -> T:
        owner = OwnedNursery()
        nursery = await owner.enter()
        try:
            cluster = Cluster(options.bootstrap_servers, nursery, client_id="raftka-spark",
                              request_timeout_ms=options.request_timeout_ms)
            try:
                with trio.fail_after(timeout):
                    await cluster.refresh_metadata()
                if not time_limit:
                    return await fn(cluster)
                with trio.fail_after(timeout):
                    return await fn(cluster)
            finally:
                await cluster.aclose()
        finally:
            await owner.exit()

    try:
        return trio.run(main)
    except KafkaConnectionError as exc:
        raise SourceError(
            f"cannot reach the brokers in option kafka.bootstrap.servers="
            f"{options.bootstrap_servers!r}: {exc}") from None
    except trio.TooSlowError:
        raise SourceError(
            f"the brokers in kafka.bootstrap.servers={options.bootstrap_servers!r} did not "
            f"answer within kafka.request.timeout.ms={options.request_timeout_ms}") from None


# --- driver side ---------------------------------------------------------------
async def topic_partitions(cluster: Cluster, options: SourceOptions, *, must_exist: bool = True
                           ) -> list[TopicPartitionKey]:
    """The partitions the options select, sorted. Topics named by subscribe or
    assign must exist (else SourceError) unless `must_exist` is false, when
    they are left out (a deleted topic, mid-stream)."""
    if options.subscribe_pattern is not None:
        metadata = await cluster.refresh_metadata(all_topics=True)
        pattern = re.compile(options.subscribe_pattern)
        return sorted((t, p) for t, info in metadata.topics.items()
                      if pattern.fullmatch(t) and not info.is_internal for p in info.partitions)
    wanted = sorted({t for t, _ in options.assign} | set(options.subscribe))
    metadata = await cluster.refresh_metadata(wanted)
    missing = [t for t in wanted if metadata.partitions_for(t) is None]
    if missing and must_exist:
        raise SourceError(
            f"topic(s) {missing} do not exist (option {options.subscription}); "
            f"create them first or fix the name")
    if options.subscribe:
        return sorted((t, p) for t in options.subscribe if t not in missing
                      for p in metadata.partitions_for(t) or ())
    out = []
    for topic, partition in options.assign:
        parts = metadata.partitions_for(topic)
        if parts is None:
            continue
        if partition not in parts:
            if must_exist:
                raise SourceError(
                    f"partition {topic}/{partition} does not exist (option assign); "
                    f"{topic} has partitions {parts}")
            continue
        out.append((topic, partition))
    return out


async def list_offsets(cluster: Cluster, targets: dict[TopicPartitionKey, int]
                       ) -> dict[TopicPartitionKey, int]:
    """ListOffsets for each partition: target EARLIEST (-2), LATEST (-1: the high
    watermark) or a timestamp (the first offset at or after it; LATEST's answer
    when no record is that recent). Retries leader moves until the caller's time limit."""
    found = await list_offsets_by_leader(cluster, {_tp(tp): target for tp, target in targets.items()})
    result = {(tp.topic, tp.partition): offset for tp, offset in found.items()}
    too_recent = [tp for tp, offset in result.items() if offset < 0 and targets[tp] >= 0]
    if too_recent:  # no record at or after the timestamp
        result.update(await list_offsets(cluster, {tp: LATEST for tp in too_recent}))
    return result


def _tp(tp: TopicPartitionKey) -> TopicPartition:
    return TopicPartition(*tp)


async def resolve_offsets(cluster: Cluster, tps: list[TopicPartitionKey], spec_kind: str,
                          per_partition: dict[TopicPartitionKey, int], timestamp: int | None,
                          option: str) -> dict[TopicPartitionKey, int]:
    """Concrete offsets for `tps` from an OffsetSpec's parts. Per-partition JSON
    must cover exactly the selected partitions, as in Spark."""
    if spec_kind in ("offsets", "timestamps"):
        unknown = sorted(set(per_partition) - set(tps))
        missing = sorted(set(tps) - set(per_partition))
        if unknown or missing:
            raise SourceError(
                f"option {option} must name every selected partition and no other: "
                + (f"not selected: {_names(unknown)}" if unknown else "")
                + ("; " if unknown and missing else "")
                + (f"missing: {_names(missing)}" if missing else ""))
    targets: dict[TopicPartitionKey, int] = {}
    fixed: dict[TopicPartitionKey, int] = {}
    for tp in tps:
        if spec_kind == "earliest":
            targets[tp] = EARLIEST
        elif spec_kind == "latest":
            targets[tp] = LATEST
        elif spec_kind == "timestamp":
            assert timestamp is not None
            targets[tp] = timestamp
        elif spec_kind == "timestamps":
            targets[tp] = per_partition[tp]
        elif per_partition[tp] < 0:
            targets[tp] = per_partition[tp]
        else:
            fixed[tp] = per_partition[tp]
    return {**fixed, **await list_offsets(cluster, targets)} if targets else fixed


def _names(tps: list[TopicPartitionKey]) -> str:
    return ", ".join(f"{t}/{p}" for t, p in tps)


# --- executor side -------------------------------------------------------------
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
    send, receive = trio.open_memory_channel[tuple[int, bytes]](1)

    async def decode_all() -> None:
        async with receive:
            async for fetch_offset, records in receive:
                decoded = await trio.to_thread.run_sync(functools.partial(
                    decode_range, rng.topic, rng.partition, records, fetch_offset, rng.end,
                    include_headers=options.include_headers))
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
                       send: trio.MemorySendChannel[tuple[int, bytes]]) -> None:
    tp = (rng.topic, rng.partition)
    offset = rng.start
    partition_max = options.max_partition_fetch_bytes
    idle_deadline = trio.current_time() + options.request_timeout_ms / 1000
    while offset < rng.end:
        if trio.current_time() > idle_deadline:
            raise SourceError(
                f"no progress reading {rng.topic}/{rng.partition} at offset {offset} (range "
                f"{rng.start}..{rng.end}) within kafka.request.timeout.ms="
                f"{options.request_timeout_ms}")
        leader = cluster.metadata.leader_for(_tp(tp))
        if leader is None:
            await cluster.refresh_metadata([rng.topic])
            if cluster.metadata.partitions_for(rng.topic) is None \
                    or rng.partition not in (cluster.metadata.partitions_for(rng.topic) or ()):
                code = cluster.metadata.topic_errors.get(rng.topic)
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    data_loss(options, f"{rng.topic}/{rng.partition} was deleted before "
                                       f"offsets {offset}..{rng.end} were read")
                    return
            await trio.sleep(cluster.retry_backoff)
            continue
        request = FetchRequest(
            replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=options.fetch_max_bytes,
            isolation_level=0, topics=[{"topic": rng.topic, "partitions": [{
                "partition": rng.partition, "fetch_offset": offset,
                "partition_max_bytes": partition_max}]}])
        try:
            response = await cluster.send_to(leader, ApiKey.FETCH, request)
        except KafkaConnectionError as exc:
            log.info("spark_source.fetch_failed", topic=rng.topic, partition=rng.partition,
                     error=str(exc))
            cluster.mark_leader_unknown([_tp(tp)])
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
                cluster.mark_leader_unknown([_tp(tp)])
                await trio.sleep(cluster.retry_backoff)
                continue
            raise error
        next_offset, partial = scan_range(part.records, offset)
        if next_offset > offset:
            await send.send((offset, part.records))
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
                             time_limit=False)
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
