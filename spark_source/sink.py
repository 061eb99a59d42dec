"""The raftka sink: `df.write.format("raftka")` and `df.writeStream.format("raftka")`.

Spark's Kafka sink, mirrored (columns and options: sink_options.py). Each task
produces its rows with its own idempotent producer and fails if any record is
not acknowledged. Guarantee: at-least-once, as Spark's Kafka sink. A task that
fails after some of its records were acknowledged, and is retried, writes them
again; a streaming micro-batch that was written but not yet committed in the
checkpoint when the query stopped is written again on restart. Idempotence
removes the duplicates the producer's own retries would make, not those.
Exactly-once needs Kafka transactions (future work, docs/spark.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from raftka.spark_source.sink_options import SinkOptions


@dataclass
class Written(WriterCommitMessage):
    records: int


def _write(options: SinkOptions, iterator: Iterator) -> Written:
    from raftka.spark_source.record_writer import write_batches

    return Written(write_batches(options, iterator))


class RaftkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> Written:
        return _write(self.options, iterator)

    def commit(self, messages: list) -> None:
        """Nothing to do: every task's records were acknowledged before it finished."""

    def abort(self, messages: list) -> None:
        """Nothing can be undone: the records successful tasks wrote stay in the topics."""


class RaftkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> Written:
        return _write(self.options, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        """Nothing to do: Spark records the batch in its checkpoint."""

    def abort(self, messages: list, batchId: int) -> None:
        """Nothing can be undone; the batch is written again when the query restarts."""
