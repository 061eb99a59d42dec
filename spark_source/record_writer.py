"""One sink task's I/O: the rows of Arrow batches produced to raftka (trio + the SDK).

Spark runs this in a Python worker per task (per micro-batch in a stream) on
pickled SinkOptions. The task opens its own producer, sends every row, and
returns only once every record is acknowledged (per kafka.acks): a delivery
error fails the task with the Kafka error, naming the topic and partition.
Records a failed task did deliver stay written; Spark's retry of the task
writes them again (at-least-once, as Spark's Kafka sink).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import trio

from raftka.client.producer import AsyncProducer
from raftka.spark_source.log_reader import log  # also quiets the SDK's debug events in workers
from raftka.spark_source.sink_options import SinkOptions


class SinkError(RuntimeError):
    """A row could not be written (a bad value, or the brokers' error)."""


def _as_bytes(value: object) -> bytes | None:
    if value is None or type(value) is bytes:
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        return value.encode()
    return bytes(value)  # type: ignore[arg-type]


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    if index < 0:  # Spark keeps the DataFrame's spelling; columns match in any case
        lowered = [n.lower() for n in batch.schema.names]
        index = lowered.index(name) if name in lowered else -1
    return None if index < 0 else batch.column(index).to_pylist()


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of `batches`; return how many were acknowledged."""
    return trio.run(_write, options, batches)


async def _write(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    failures: list[BaseException] = []
    written = 0

    def delivered(meta, exc) -> None:
        nonlocal written
        if exc is None:
            written += 1
        elif not failures:
            failures.append(exc)

    async with AsyncProducer(options.bootstrap_servers, **options.producer) as producer:
        buffered = sent = 0
        while True:
            # Spark computes the next batch while the producer keeps sending.
            batch = await trio.to_thread.run_sync(next, batches, None)
            if batch is None:
                break
            values = _column(batch, "value")
            assert values is not None  # check_columns made sure
            n = len(values)
            keys = _column(batch, "key") or [None] * n
            topics = _column(batch, "topic") if options.topic is None else None
            partitions = _column(batch, "partition") or [None] * n
            headers = _column(batch, "headers") or [None] * n
            for i in range(n):
                topic = options.topic or (topics[i] if topics is not None else None)
                if not topic:
                    raise SinkError(
                        f"row {sent + i} has a null topic: set the option topic or fill the "
                        "topic column")
                hdrs = headers[i]
                if hdrs and any(h is None or h["key"] is None for h in hdrs):
                    raise SinkError(f"row {sent + i} has a header with a null key: {hdrs!r}")
                fut = producer.send_nowait(
                    topic, _as_bytes(values[i]), _as_bytes(keys[i]),
                    [(h["key"], h["value"]) for h in hdrs] if hdrs else None, partitions[i])
                fut.add_callback(delivered)
            sent += n
            buffered += batch.nbytes
            if buffered >= options.buffer_memory:  # bound what waits in memory
                await producer.flush()
                buffered = 0
            if failures:
                break
        await producer.flush()
    log.debug("spark_sink.task_written", records=written, failed=bool(failures))
    if failures:
        exc = failures[0]
        raise SinkError(f"writing to raftka failed: {type(exc).__name__}: {exc}") from exc
    return written
