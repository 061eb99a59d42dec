"""The PySpark Python Data Source `raftka`: batch and streaming reads and writes of topics.

    from raftka.spark_source import RaftkaDataSource
    spark.dataSource.register(RaftkaDataSource)
    df = (spark.read.format("raftka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Columns and options mirror Spark's built-in Kafka source (see options.py) and
sink (sink.py, sink_options.py).
Spark runs every method here in Python worker processes on pickled copies,
so readers hold only parsed options and connect inside each call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from raftka.spark_source.offset_ranges import (
    OffsetRange,
    cap_offsets,
    from_stream_offset,
    plan_ranges,
    to_stream_offset,
)
from raftka.spark_source.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, parse_options

if TYPE_CHECKING:
    import pyarrow as pa

    from raftka.client.cluster import Cluster

# Spark calls each method below in a Python worker process, and what a method needs
# differs: schema() (the `load()` call) only the options, the planner (plan/offsets) the
# SDK and trio (log_reader), only the read tasks the Arrow decoding (range_reader). So
# those I/O modules are imported inside the methods that use them, not here: a fresh
# worker pays only for its own imports (docs/performance.md, "Spark: the first query").

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"

TopicPartitionKey = tuple[str, int]


class RangePartition(InputPartition):
    """One Spark task: one offset range of one topic-partition (pickled to executors)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)

    @property
    def range(self) -> OffsetRange:
        return self.value


class RaftkaDataSource(DataSource):
    """`spark.read.format("raftka")` / `spark.readStream.format("raftka")`."""

    @classmethod
    def name(cls) -> str:
        return "raftka"

    def schema(self) -> str:
        # Validate early so a bad option fails at load(), naming the option.
        include_headers = parse_options(self.options, streaming=None).include_headers
        return SCHEMA_DDL + (HEADERS_DDL if include_headers else "")

    def reader(self, schema) -> DataSourceReader:
        return RaftkaBatchReader(parse_options(self.options))

    def streamReader(self, schema) -> DataSourceStreamReader:
        return RaftkaStreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from raftka.spark_source.sink import RaftkaBatchWriter

        return RaftkaBatchWriter(_sink_options(self.options, schema, overwrite))

    def streamWriter(self, schema, overwrite: bool):
        from raftka.spark_source.sink import RaftkaStreamWriter

        # outputMode complete (overwrite) writes the whole result table every trigger,
        # appended to the topic, as Spark's Kafka sink does.
        return RaftkaStreamWriter(_sink_options(self.options, schema, False))


def _sink_options(options, schema, overwrite: bool):
    from raftka.spark_source.sink_options import SinkOptionError, check_columns, parse_sink_options

    if overwrite:
        # As Spark's Kafka sink: a topic is appended to, never replaced.
        raise SinkOptionError("save mode overwrite is not supported: the raftka sink appends "
                              "to topics; use mode append")
    parsed = parse_sink_options(options)
    check_columns({f.name: f.dataType.simpleString() for f in schema.fields}, parsed.topic)
    return parsed


def _resolve(cluster: Cluster, tps: list[TopicPartitionKey], spec: OffsetSpec, option: str,
             isolation_level: int = 0):
    from raftka.spark_source.log_reader import resolve_offsets

    return resolve_offsets(cluster, tps, spec.kind, spec.as_dict(), spec.timestamp, option,
                           isolation_level)


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # When partitions() returns none, Spark still runs one task with a plain
    # InputPartition(None): an empty read.
    offset_range = partition.value
    if offset_range is None:
        return
    if not isinstance(offset_range, OffsetRange):
        raise TypeError(f"expected an InputPartition holding an OffsetRange, got {partition!r}")
    from raftka.spark_source.range_reader import iter_range_batches

    yield from iter_range_batches(options, offset_range)


class RaftkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def plan(self) -> list[OffsetRange]:
        """The offset ranges this read covers (resolved now, against the brokers)."""
        from raftka.spark_source.log_reader import SourceError, run_with_cluster, topic_partitions

        options = self.options

        async def plan(cluster: Cluster) -> list[OffsetRange]:
            tps = await topic_partitions(cluster, options)
            if not tps:
                return []
            start = await _resolve(cluster, tps, options.starting or OffsetSpec("earliest"),
                                   "startingOffsets", options.isolation_level)
            end = await _resolve(cluster, tps, options.ending, "endingOffsets",
                                 options.isolation_level)
            backwards = [f"{t}/{p}: {start[(t, p)]} > {end[(t, p)]}" for t, p in tps
                         if start[(t, p)] > end[(t, p)]]
            if backwards:
                raise SourceError(
                    "the starting offsets are past the ending offsets for "
                    + ", ".join(backwards) + " (options startingOffsets/endingOffsets)")
            return plan_ranges(start, end, options.min_partitions)

        return run_with_cluster(options, plan)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class RaftkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are `{"topic": {"partition": next offset}}`, built by `to_stream_offset`.

    A micro-batch [start, end) reads up to the high watermark at planning time,
    so it only ever contains committed records.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict | None = None
        self._available_now_target: dict[TopicPartitionKey, int] | None = None

    def initialOffset(self) -> dict:
        # Spark calls this twice in a fresh query: both must agree.
        if self._initial is None:
            from raftka.spark_source.log_reader import run_with_cluster, topic_partitions

            options = self.options

            async def initial(cluster: Cluster) -> dict[TopicPartitionKey, int]:
                tps = await topic_partitions(cluster, options)
                if not tps:
                    return {}
                return await _resolve(cluster, tps, options.starting or OffsetSpec("latest"),
                                      "startingOffsets", options.isolation_level)

            self._initial = to_stream_offset(run_with_cluster(options, initial))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self._latest()

    def _latest(self) -> dict[TopicPartitionKey, int]:
        from raftka.spark_source.log_reader import list_offsets, run_with_cluster, topic_partitions

        options = self.options

        async def latest(cluster: Cluster) -> dict[TopicPartitionKey, int]:
            tps = await topic_partitions(cluster, options, must_exist=False)
            return await list_offsets(cluster, {tp: LATEST for tp in tps},
                                      isolation_level=options.isolation_level) if tps else {}

        return run_with_cluster(options, latest)

    def _earliest(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        if not tps:
            return {}
        from raftka.spark_source.log_reader import list_offsets, run_with_cluster

        return run_with_cluster(
            self.options, lambda cluster: list_offsets(cluster, {tp: EARLIEST for tp in tps}))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from raftka.spark_source.log_reader import data_loss, log

        begin = from_stream_offset(start)
        latest = self._latest()
        for tp in sorted(set(begin) - set(latest)):
            data_loss(self.options, f"{tp[0]}/{tp[1]} is gone (its topic was deleted or the "
                                    f"subscription no longer matches it) at offset {begin[tp]}")
        target = self._available_now_target
        if target is not None:
            # availableNow: nothing past what existed when the query started
            latest = {tp: min(off, target[tp]) for tp, off in latest.items() if tp in target}
        new = sorted(set(latest) - set(begin))
        if new:
            log.info("spark_source.new_partitions", partitions=[f"{t}/{p}" for t, p in new])
            begin = {**begin, **self._earliest(new)}
        shrunk = [tp for tp in latest if latest[tp] < begin[tp]]
        for tp in shrunk:
            data_loss(self.options, f"{tp[0]}/{tp[1]} ends at offset {latest[tp]}, before "
                                    f"the query's position {begin[tp]} (was it recreated?)")
            begin[tp] = latest[tp]
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets({tp: begin[tp] for tp in latest}, latest, limit.max_rows)
        else:
            end = dict(latest)
        return to_stream_offset(end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_stream_offset(start)
        stop = from_stream_offset(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin = {**begin, **self._earliest(new)}
        for tp in stop:
            if stop[tp] < begin[tp]:
                begin[tp] = stop[tp]  # reported as data loss by latestOffset
        return [RangePartition(r) for r in plan_ranges(begin, stop, self.options.min_partitions)]

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in the broker."""
