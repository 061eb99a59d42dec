"""The stream reader's offset bookkeeping, called directly (as Spark's driver-side
worker does) against a real node: stable JSON, admission control, availableNow."""

from __future__ import annotations

import json
import threading

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from raftka.spark_source.data_source import RaftkaStreamReader
from raftka.spark_source.offset_ranges import OffsetRange
from raftka.spark_source.options import parse_options
from raftka.spark_source.range_reader import iter_range_batches
from tests.spark.spark_support import create_topic, produce
from tests.support import wait_until


def _reader(bootstrap: str, topic: str, **extra: str) -> RaftkaStreamReader:
    return RaftkaStreamReader(parse_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
         "startingOffsets": "earliest", **extra}, streaming=True))


def _size(start: dict, end: dict) -> int:
    return sum(n - start.get(t, {}).get(p, 0) for t, parts in end.items() for p, n in parts.items())


def test_offsets_json_admission_control_and_available_now(bootstrap) -> None:
    topic = "reader-offsets"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 30, headers=False)
    reader = _reader(bootstrap, topic)

    initial = reader.initialOffset()
    assert reader.initialOffset() is initial  # Spark asks twice: same answer
    assert json.dumps(initial) == json.dumps({topic: {"0": 0, "1": 0, "2": 0}})

    capped = reader.latestOffset(initial, ReadMaxRows(7))
    assert _size(initial, capped) == 7
    everything = reader.latestOffset(capped, ReadAllAvailable())
    assert json.dumps(everything) == json.dumps({topic: {"0": 10, "1": 10, "2": 10}})
    # No new data: the very same JSON (else Spark would run empty micro-batches).
    assert json.dumps(reader.latestOffset(everything, ReadAllAvailable())) == \
        json.dumps(everything)
    # What Spark restores from a checkpoint (string keys, parsed JSON) plans the same ranges.
    ranges = [p.value for p in reader.partitions(json.loads(json.dumps(capped)), everything)]
    assert sum(r.size for r in ranges) == 30 - 7
    assert all(r.end == 10 for r in ranges)

    reader.prepareForTriggerAvailableNow()
    produce(bootstrap, topic, 6, start=30, headers=False)
    assert json.dumps(reader.latestOffset(everything, ReadAllAvailable())) == \
        json.dumps(everything)  # nothing produced after the availableNow target
    assert _size(everything, _reader(bootstrap, topic).latestOffset(
        everything, ReadAllAvailable())) == 6  # a fresh reader sees it


def test_min_partitions_splits_micro_batches(bootstrap) -> None:
    topic = "reader-split"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 40, partitions=1, headers=False)
    reader = _reader(bootstrap, topic, minPartitions="4")
    start = reader.initialOffset()
    ranges = [p.value for p in reader.partitions(start, reader.latestOffset(
        start, ReadAllAvailable()))]
    assert [(r.start, r.end) for r in ranges] == [(0, 10), (10, 20), (20, 30), (30, 40)]


def test_range_reader_small_fetches_and_early_close(bootstrap) -> None:
    topic = "reader-close"
    create_topic(bootstrap, topic, 1)
    produced = produce(bootstrap, topic, 200, partitions=1, headers=False, value_size=200)
    options = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                             "kafka.max.partition.fetch.bytes": "2048"})
    batches = list(iter_range_batches(options, OffsetRange(topic, 0, 5, 190)))
    assert len(batches) > 1  # several fetches, stitched without gap or overlap
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(5, 190))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [
        r["value"] for r in produced[5:190]]

    reader = iter_range_batches(options, OffsetRange(topic, 0, 0, 200))
    assert next(reader).num_rows > 0
    reader.close()  # Spark stopped reading (e.g. a LIMIT): the fetch thread ends
    wait_until(lambda: not any(t.name.startswith("raftka-read-reader-close")
                               for t in threading.enumerate()),
               timeout=10, what="the fetch thread to end")
