"""The source's driver-side I/O: topic discovery and offset lookups over the SDK's Cluster.

Driver-side calls are short `trio.run`s (`run_with_cluster`) in Spark's planner
worker; the executors' range reads are in range_reader.py, so a planner does not
import the Arrow decoding it never uses.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import structlog
import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError
from raftka.client.lifecycle import OwnedNursery
from raftka.client.list_offsets import list_offsets as list_offsets_by_leader
from raftka.client.records import TopicPartition
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
                     time_limit: bool = True, topics: Iterable[str] = ()) -> T:
    """Run `fn(cluster)` on a fresh trio loop with a connected Cluster whose metadata
    covers `topics`; unreachable bootstrap servers or a timeout (kafka.request.timeout.ms
    for connecting, and for the whole call with `time_limit`) become a SourceError
    naming the option."""
    timeout = options.request_timeout_ms / 1000

    async def main() -> T:
        owner = OwnedNursery()
        nursery = await owner.enter()
        try:
            cluster = Cluster(options.bootstrap_servers, nursery, client_id=options.client_id,
                              request_timeout_ms=options.request_timeout_ms, security=options.security)
            try:
                with trio.fail_after(timeout):
                    await cluster.refresh_metadata(topics)
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


async def list_offsets(cluster: Cluster, targets: dict[TopicPartitionKey, int], *,
                       isolation_level: int = 0) -> dict[TopicPartitionKey, int]:
    """ListOffsets for each partition: target EARLIEST (-2), LATEST (-1: the high
    watermark; with isolation_level 1, read_committed, the last stable offset) or a timestamp (the first offset at or after it; LATEST's answer
    when no record is that recent). Retries leader moves until the caller's time limit."""
    found = await list_offsets_by_leader(cluster, {_tp(tp): target for tp, target in targets.items()},
                                         isolation_level=isolation_level)
    result = {(tp.topic, tp.partition): offset for tp, offset in found.items()}
    too_recent = [tp for tp, offset in result.items() if offset < 0 and targets[tp] >= 0]
    if too_recent:  # no record at or after the timestamp
        result.update(await list_offsets(cluster, {tp: LATEST for tp in too_recent},
                                         isolation_level=isolation_level))
    return result


def _tp(tp: TopicPartitionKey) -> TopicPartition:
    return TopicPartition(*tp)


async def resolve_offsets(cluster: Cluster, tps: list[TopicPartitionKey], spec_kind: str,
                          per_partition: dict[TopicPartitionKey, int], timestamp: int | None,
                          option: str, isolation_level: int = 0) -> dict[TopicPartitionKey, int]:
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
    return {**fixed, **await list_offsets(cluster, targets, isolation_level=isolation_level)} \
        if targets else fixed


def _names(tps: list[TopicPartitionKey]) -> str:
    return ", ".join(f"{t}/{p}" for t, p in tps)
