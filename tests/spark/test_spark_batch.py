"""Batch reads with spark.read.format("raftka") against a real raftka node."""

from __future__ import annotations

import json

import pytest

from tests.spark.spark_support import BASE_TS, create_topic, produce, row_key

N = 300


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> tuple[str, list[dict]]:
    name = "batch-events"
    create_topic(bootstrap, name, 3)
    return name, produce(bootstrap, name, N)


def _read(spark, bootstrap: str, **options: str):
    reader = spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_exactly_what_was_produced(spark, bootstrap, topic) -> None:
    name, produced = topic
    df = _read(spark, bootstrap, subscribe=name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    rows = sorted((r.asDict(recursive=True) for r in df.collect()), key=row_key)
    assert len(rows) == N
    expected = sorted(produced, key=row_key)
    for got, want in zip(rows, expected, strict=True):
        assert (got["partition"], got["offset"], bytes(got["key"]), bytes(got["value"])) == (
            want["partition"], want["offset"], want["key"], want["value"])
        assert got["topic"] == name and got["timestampType"] == 0
        assert int(got["timestamp"].timestamp() * 1000) == want["ts_ms"]
        headers = [{"key": h["key"], "value": None if h["value"] is None else bytes(h["value"])}
                   for h in got["headers"]]
        assert headers == want["headers"]
    # offsets in each partition are 0..N/3-1 (one record per offset, nothing missing)
    for p in range(3):
        assert [r["offset"] for r in rows if r["partition"] == p] == list(range(N // 3))


def test_offsets_json_selects_ranges(spark, bootstrap, topic) -> None:
    name, _ = topic
    df = _read(spark, bootstrap, subscribe=name,
               startingOffsets=json.dumps({name: {"0": 10, "1": -2, "2": -1}}),
               endingOffsets=json.dumps({name: {"0": 20, "1": 5, "2": -1}}))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]


def test_timestamps_select_ranges(spark, bootstrap, topic) -> None:
    name, produced = topic
    # record i has timestamp BASE_TS + i s; start at i = 150, end before i = 240
    df = _read(spark, bootstrap, subscribe=name, startingTimestamp=str(BASE_TS + 150_000),
               endingOffsetsByTimestamp=json.dumps(
                   {name: {str(p): BASE_TS + 240_000 for p in range(3)}}))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted((r["partition"], r["offset"]) for r in produced if 150 <= r["i"] < 240)
    assert got == want


def test_min_partitions_splits_without_loss_or_overlap(spark, bootstrap, topic) -> None:
    name, _ = topic
    df = _read(spark, bootstrap, subscribe=name, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == sorted((p, o) for p in range(3) for o in range(N // 3))


def test_assign_and_pattern(spark, bootstrap, topic) -> None:
    name, _ = topic
    df = _read(spark, bootstrap, assign=json.dumps({name: [2]}))
    assert {r.partition for r in df.select("partition").collect()} == {2}
    assert df.count() == N // 3
    assert _read(spark, bootstrap, subscribePattern="batch-ev.*").count() == N
    assert _read(spark, bootstrap, subscribePattern="no-such-topic-.*").count() == 0


def test_actionable_errors(spark, bootstrap) -> None:
    with pytest.raises(Exception, match="do not exist.*subscribe='missing-topic'"):
        _read(spark, bootstrap, subscribe="missing-topic").collect()
    with pytest.raises(Exception, match="cannot reach the brokers in option "
                                        "kafka.bootstrap.servers"):
        _read(spark, "127.0.0.1:1", subscribe="x").collect()
    with pytest.raises(Exception, match="option minPartitions must be a positive integer"):
        _read(spark, bootstrap, subscribe="x", minPartitions="none")
