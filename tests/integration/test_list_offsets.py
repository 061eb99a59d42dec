"""client/list_offsets.py (ListOffsets by leader, shared by the consumer, `raftka groups` and
the Spark source) against a real one-node server."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator

import pytest
import trio

from raftka.client import AsyncAdmin, AsyncProducer, NewTopic, TopicPartition
from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaTimeoutError
from raftka.client.list_offsets import EARLIEST, LATEST, list_offsets, list_offsets_once
from raftka.log.compression import Compression
from raftka.log.record_batch import Record, encode_batch
from tests.compat.wire_client import WireConnection
from tests.integration.sdk_broker import one_node_server

TOPIC = "offsets"
BASE_TS = 1_700_000_000_000
# partition 0: 5 records with timestamps BASE_TS + 0, 1000, ..., 4000; partition 1: empty
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
MISSING = TopicPartition("no-such-topic", 0)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("list-offsets")) as address:
        trio.run(_fill, address)
        yield address


async def _fill(bootstrap: str) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, 2, 1)])
    async with AsyncProducer(bootstrap, acks="all") as producer:
        for i in range(5):
            await producer.send(TOPIC, b"v%d" % i, partition=0, timestamp_ms=BASE_TS + i * 1000)


@pytest.fixture
async def cluster(bootstrap: str, nursery: trio.Nursery) -> AsyncIterator[Cluster]:
    cluster = Cluster(bootstrap, nursery, retry_backoff_ms=20)
    try:
        await cluster.refresh_metadata([TOPIC])
        yield cluster
    finally:
        await cluster.aclose()


# (what, targets, the offsets expected)
CASES = [
    ("earliest and latest", {P0: EARLIEST, P1: EARLIEST}, {P0: 0, P1: 0}),
    ("latest is the high watermark", {P0: LATEST, P1: LATEST}, {P0: 5, P1: 0}),
    ("a timestamp finds the first record at or after it", {P0: BASE_TS + 2500}, {P0: 3}),
    ("an exact timestamp", {P0: BASE_TS + 2000}, {P0: 2}),
    ("before every record", {P0: BASE_TS - 1}, {P0: 0}),
    ("no record that recent: Kafka's -1", {P0: BASE_TS + 10_000, P1: BASE_TS}, {P0: -1, P1: -1}),
    ("targets mixed in one request", {P0: LATEST, P1: EARLIEST}, {P0: 5, P1: 0}),
]


@pytest.mark.parametrize("what,targets,expected", CASES, ids=[c[0] for c in CASES])
async def test_list_offsets(cluster: Cluster, what, targets, expected) -> None:
    assert await list_offsets(cluster, targets, timeout=10) == expected
    answer = await list_offsets_once(cluster, targets)
    assert (answer.offsets, answer.failed) == (expected, {})


async def test_an_unknown_leader_is_looked_up_first(cluster: Cluster) -> None:
    cluster.mark_leader_unknown([P0])
    once = await list_offsets_once(cluster, {P0: LATEST})
    assert once.offsets == {} and once.failed[P0].name == "LEADER_NOT_AVAILABLE"
    assert await list_offsets(cluster, {P0: LATEST}, timeout=10) == {P0: 5}


async def test_one_round_reports_what_failed_and_answers_the_rest(cluster: Cluster) -> None:
    answer = await list_offsets_once(cluster, {P0: LATEST, MISSING: LATEST})
    assert answer.offsets == {P0: 5}
    assert set(answer.failed) == {MISSING} and answer.failed[MISSING].retriable


async def test_retries_until_the_timeout_then_names_the_partitions(cluster: Cluster) -> None:
    with pytest.raises(KafkaTimeoutError, match="no-such-topic"):
        await list_offsets(cluster, {P0: LATEST, MISSING: LATEST}, timeout=0.2)


async def test_without_a_timeout_the_callers_scope_bounds_it(cluster: Cluster) -> None:
    with trio.move_on_after(0.2) as scope:
        await list_offsets(cluster, {MISSING: LATEST})
    assert scope.cancelled_caught


async def test_the_bootstrap_connection_becomes_the_brokers(cluster: Cluster, bootstrap: str) -> None:
    """One socket per broker: the bootstrap server at the broker's advertised address is it."""
    boot = await cluster.any_connection()
    (node_id,) = cluster.metadata.brokers
    assert await cluster.connection(node_id) is boot
    assert await cluster.any_connection() is boot


async def test_another_name_for_the_broker_gets_its_own_connection(bootstrap: str, nursery: trio.Nursery) -> None:
    port = bootstrap.rsplit(":", 1)[1]
    cluster = Cluster(f"localhost:{port}", nursery)
    try:
        await cluster.refresh_metadata([TOPIC])
        boot = await cluster.any_connection()
        (node_id,) = cluster.metadata.brokers
        node = await cluster.connection(node_id)
        assert node is not boot and (node.host, boot.host) == ("127.0.0.1", "localhost")
        assert (await list_offsets(cluster, {P0: LATEST}, timeout=10)) == {P0: 5}
    finally:
        await cluster.aclose()


BUSY_BATCH = 20


def _busy_batch(first: int) -> bytes:
    """Records first .. first + 19 of the busy topic: record i carries BASE_TS + 10 i."""
    records = [Record(key=None, value=b"v%d" % i, timestamp=BASE_TS + 10 * i) for i in range(first, first + BUSY_BATCH)]
    return encode_batch(records, compression=Compression.ZSTD)


def test_timestamp_lookups_answer_right_while_the_log_grows(bootstrap: str) -> None:
    """ListOffsets by max timestamp (-3) and by timestamp locate their batch on the event loop and
    read it in a worker thread, while that loop goes on appending zstd batches and rolling 4 KiB
    segments: every answer names the record Kafka names, with its own timestamp."""
    topic = "offsets-busy"
    errors: list[object] = []
    stop = threading.Event()

    def append() -> None:
        try:
            with WireConnection(bootstrap) as conn:
                for first in range(0, 4000, BUSY_BATCH):
                    if stop.is_set():
                        return
                    errors.extend(filter(None, [conn.produce(topic, 0, _busy_batch(first)).error_code]))
        except Exception as exc:  # reported by the test below
            errors.append(exc)

    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic, 1, {"segment.bytes": "4096"}) == 0
        appender = threading.Thread(target=append)
        appender.start()
        try:
            answered, last = 0, -1
            for round_ in range(300):
                top = conn.list_offset(topic, 0, -3)
                assert top.error_code == 0
                if top.offset < 0:  # nothing visible yet
                    continue
                assert top.timestamp == BASE_TS + 10 * top.offset and top.offset >= last
                last = top.offset
                k = round_ * 7 % (top.offset + 1)  # a record at or below the max: visible
                found = conn.list_offset(topic, 0, BASE_TS + 10 * k - 5)
                assert (found.error_code, found.offset, found.timestamp) == (0, k, BASE_TS + 10 * k)
                answered += 1
        finally:
            stop.set()
            appender.join(30)
    assert errors == [] and answered > 100 and last > 0
