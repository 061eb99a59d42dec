"""Fetch semantics on the raw protocol against a real raftka server process.

Long polling (max_wait_ms / min_bytes), offset range errors, size limits and
unknown partitions. Timing bounds are deliberately generous (a wake-up must come
within half of max_wait), so a loaded machine cannot make them flaky.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from raftka.log.record_batch import iter_batches
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection, values_batch

LONG_WAIT_MS = 10_000
_topics = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("fetch")) as process:
        yield process


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[WireConnection]:
    with WireConnection(server.bootstrap) as connection:
        yield connection


@pytest.fixture
def topic(conn: WireConnection) -> str:
    """A fresh two-partition topic per test."""
    name = f"fetch-{next(_topics)}"
    assert conn.create_topic(name, 2) == 0
    return name


def records_of(result) -> list[bytes | None]:
    return [r.value for b in iter_batches(bytes(result.records)) for r in b.records]


def batch_count(result) -> int:
    return sum(1 for _ in iter_batches(bytes(result.records)))


def test_empty_fetch_waits_for_max_wait(conn: WireConnection, topic: str) -> None:
    start = time.monotonic()
    result = conn.fetch(topic, 0, 0, max_wait_ms=1000, min_bytes=1)
    elapsed = time.monotonic() - start
    assert result.error_code == 0 and len(result.records) == 0
    assert elapsed >= 0.8, f"an empty fetch returned after {elapsed:.2f}s, max_wait was 1s"


def test_long_poll_wakes_early_when_data_arrives(server: ServerProcess, conn: WireConnection,
                                                 topic: str) -> None:
    cid = conn.send_request(ApiKey.FETCH, 11, conn.fetch_request_body(
        topic, 0, 0, max_wait_ms=LONG_WAIT_MS, min_bytes=1))
    assert not conn.response_pending(0.5), "the fetch answered before any data existed"
    with WireConnection(server.bootstrap) as producer:
        produced_at = time.monotonic()
        assert producer.produce(topic, 0, values_batch([b"wake up"])).error_code == 0
    response = conn.receive_response(ApiKey.FETCH, 11, cid, timeout=LONG_WAIT_MS / 1000 + 5)
    woke_after = time.monotonic() - produced_at
    result = response.responses[0].partitions[0]
    assert result.error_code == 0
    assert records_of(result) == [b"wake up"]
    assert result.high_watermark == 1
    assert woke_after < LONG_WAIT_MS / 2000, (
        f"the fetch returned {woke_after:.2f}s after the produce, max_wait {LONG_WAIT_MS}ms")


def test_data_on_another_partition_does_not_end_the_wait(server: ServerProcess,
                                                         conn: WireConnection, topic: str) -> None:
    cid = conn.send_request(ApiKey.FETCH, 11, conn.fetch_request_body(
        topic, 0, 0, max_wait_ms=1500, min_bytes=1))
    with WireConnection(server.bootstrap) as producer:
        assert producer.produce(topic, 1, values_batch([b"elsewhere"])).error_code == 0
    assert not conn.response_pending(0.5), "data on partition 1 answered a fetch of partition 0"
    result = conn.receive_response(ApiKey.FETCH, 11, cid).responses[0].partitions[0]
    assert result.error_code == 0 and len(result.records) == 0


def test_min_bytes_respected(server: ServerProcess, conn: WireConnection, topic: str) -> None:
    cid = conn.send_request(ApiKey.FETCH, 11, conn.fetch_request_body(
        topic, 0, 0, max_wait_ms=LONG_WAIT_MS, min_bytes=5000))
    with WireConnection(server.bootstrap) as producer:
        assert producer.produce(topic, 0, values_batch([b"small"])).error_code == 0
        assert not conn.response_pending(0.7), "answered with fewer than min_bytes"
        produced_at = time.monotonic()
        assert producer.produce(topic, 0, values_batch([b"L" * 6000])).error_code == 0
    response = conn.receive_response(ApiKey.FETCH, 11, cid, timeout=LONG_WAIT_MS / 1000 + 5)
    woke_after = time.monotonic() - produced_at
    result = response.responses[0].partitions[0]
    assert records_of(result) == [b"small", b"L" * 6000]
    assert len(result.records) >= 5000
    assert woke_after < LONG_WAIT_MS / 2000


def test_min_bytes_not_reached_returns_what_there_is_at_max_wait(conn: WireConnection,
                                                                 topic: str) -> None:
    assert conn.produce(topic, 0, values_batch([b"a", b"b"])).error_code == 0
    start = time.monotonic()
    result = conn.fetch(topic, 0, 0, max_wait_ms=1000, min_bytes=1 << 20)
    assert time.monotonic() - start >= 0.8
    assert result.error_code == 0 and records_of(result) == [b"a", b"b"]


def test_offset_out_of_range(conn: WireConnection, topic: str) -> None:
    assert conn.produce(topic, 0, values_batch([b"x"] * 3)).error_code == 0
    for offset in (4, 103, 2**40):
        result = conn.fetch(topic, 0, offset, max_wait_ms=LONG_WAIT_MS)  # errors do not wait
        assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE, offset
        assert result.high_watermark == 3 and result.log_start_offset == 0
        assert len(result.records) == 0
    # At the log end: no error, nothing to return.
    result = conn.fetch(topic, 0, 3, max_wait_ms=0)
    assert result.error_code == 0 and len(result.records) == 0
    # Inside a batch: the whole batch holding the offset comes back (consumers skip the head).
    result = conn.fetch(topic, 0, 1)
    assert [b.header.base_offset for b in iter_batches(bytes(result.records))] == [0]


def test_partition_max_bytes_honoured_but_at_least_one_batch(conn: WireConnection,
                                                             topic: str) -> None:
    batches = [values_batch([bytes([65 + i]) * 1000]) for i in range(5)]
    size = len(batches[0])
    for batch in batches:
        assert conn.produce(topic, 0, batch).error_code == 0
    for limit, expected in ((10, 1), (size, 1), (2 * size + size // 2, 2), (10 * size, 5)):
        result = conn.fetch(topic, 0, 0, partition_max_bytes=limit)
        assert result.error_code == 0
        assert batch_count(result) == expected, f"partition_max_bytes {limit}"
        assert len(result.records) == expected * size  # whole batches only
    # From the middle, with the response-level max_bytes as the binding limit.
    result = conn.fetch(topic, 0, 2, max_bytes=10)
    assert records_of(result) == [b"C" * 1000]


def test_response_max_bytes_spans_partitions(conn: WireConnection, topic: str) -> None:
    """The first partition may overshoot max_bytes by its first batch (KIP-74); a later one gets
    nothing once the response is full."""
    batch_size = len(values_batch([b"p" * 1000]))
    for partition in (0, 1):
        for _ in range(3):
            assert conn.produce(topic, partition, values_batch([b"p" * 1000])).error_code == 0
    body = conn.fetch_request_body(topic, 0, 0, max_bytes=batch_size + batch_size // 2)
    body["topics"][0]["partitions"].append({**body["topics"][0]["partitions"][0], "partition": 1})
    response = conn.request(ApiKey.FETCH, 11, body)
    sizes = {p.partition_index: len(p.records) for p in response.responses[0].partitions}
    assert sizes[0] == batch_size
    assert sum(sizes.values()) <= batch_size + batch_size // 2, sizes


def test_unknown_topic_or_partition(conn: WireConnection, topic: str) -> None:
    start = time.monotonic()
    for name, partition in (("no-such-topic", 0), (topic, 2), (topic, -1)):
        result = conn.fetch(name, partition, 0, max_wait_ms=LONG_WAIT_MS)
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (name, partition)
        assert len(result.records) == 0
    assert time.monotonic() - start < LONG_WAIT_MS / 1000, "an error answer waited for max_wait"


def test_unknown_partition_does_not_hide_good_ones(conn: WireConnection, topic: str) -> None:
    assert conn.produce(topic, 0, values_batch([b"here"])).error_code == 0
    body = conn.fetch_request_body(topic, 0, 0)
    body["topics"].append({"topic": "no-such-topic", "partitions": body["topics"][0]["partitions"]})
    response = conn.request(ApiKey.FETCH, 11, body)
    good, bad = response.responses[0].partitions[0], response.responses[1].partitions[0]
    assert good.error_code == 0 and records_of(good) == [b"here"]
    assert bad.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
