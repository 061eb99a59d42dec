"""The SDK against a real one-node raftka server process on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import trio

from raftka.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    OffsetOutOfRangeError,
    Producer,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from raftka.client.partitioner import partition_for_key
from tests.integration.sdk_broker import one_node_server


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("sdk-broker")) as address:
        yield address


async def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, partitions, 1)])


async def consume_all(bootstrap: str, tps: list[TopicPartition], expected: int,
                      timeout: float = 20.0, **options) -> list:
    out: list = []
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest", **options) as consumer:
        consumer.assign(tps)
        with trio.fail_after(timeout):
            while len(out) < expected:
                for records in (await consumer.poll(1000)).values():
                    out.extend(records)
    return out


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
async def test_idempotent_round_trip_per_codec(bootstrap: str, codec: str | None) -> None:
    topic = f"rt-{codec or 'none'}"
    await create_topic(bootstrap, topic, partitions=3)
    sent = [(f"key-{i % 17}".encode(), bytes([i % 256]) * (i % 50) + f"#{i}".encode(),
             (("n", str(i).encode()), ("none", None))) for i in range(300)]
    async with AsyncProducer(bootstrap, acks="all", enable_idempotence=True,
                             compression_type=codec, linger_ms=2, batch_size=4096) as producer:
        futures = [producer.send_nowait(topic, v, key=k, headers=h) for k, v, h in sent]
        await producer.flush()
    metas = [f.result() for f in futures]
    for (key, _, _), meta in zip(sent, metas, strict=True):
        assert meta.partition == partition_for_key(key, 3)
    got = await consume_all(bootstrap, [TopicPartition(topic, p) for p in range(3)], len(sent))
    assert len(got) == len(sent)
    by_offset = {(r.partition, r.offset): r for r in got}
    for (key, value, headers), meta in zip(sent, metas, strict=True):
        record = by_offset[(meta.partition, meta.offset)]
        assert (record.key, record.value, record.headers) == (key, value, headers)
    for p in range(3):
        mine = [int(r.value.rsplit(b"#", 1)[1]) for r in got if r.partition == p]
        offsets = [r.offset for r in got if r.partition == p]
        assert mine == sorted(mine) and offsets == list(range(len(offsets)))


async def test_send_waits_for_the_ack_and_acks_zero_reports_no_offset(bootstrap: str) -> None:
    topic = "acks"
    await create_topic(bootstrap, topic)
    async with AsyncProducer(bootstrap, acks=1) as producer:
        first = await producer.send(topic, b"a", timestamp_ms=1234)
        second = await producer.send(topic, b"b")
    assert (first.topic, first.partition, first.offset, first.timestamp) == (topic, 0, 0, 1234)
    assert second.offset == 1
    async with AsyncProducer(bootstrap, acks=0) as producer:
        meta = await producer.send(topic, b"c")
    assert meta.offset == -1
    got = await consume_all(bootstrap, [TopicPartition(topic, 0)], 3)
    assert [r.value for r in got] == [b"a", b"b", b"c"]


async def test_sending_to_an_unknown_partition_fails_with_a_typed_error(bootstrap: str) -> None:
    topic = "one-part"
    await create_topic(bootstrap, topic)
    async with AsyncProducer(bootstrap) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match="partition 5"):
            await producer.send(topic, b"x", partition=5)


async def test_long_poll_wakes_when_data_arrives(bootstrap: str) -> None:
    topic = "long-poll"
    await create_topic(bootstrap, topic)
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(bootstrap, auto_offset_reset="latest",
                             fetch_max_wait_ms=30000) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 0
        result: dict = {}

        async def poll() -> None:
            result.update(await consumer.poll(30000))

        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            cluster = consumer._require_cluster()
            with trio.fail_after(10):  # wait until the Fetch is parked on the broker
                while not any(c.in_flight for c in cluster._connections.values()):
                    await trio.sleep(0.01)
            async with AsyncProducer(bootstrap) as producer:
                await producer.send(topic, b"wake up")
        elapsed = time.monotonic() - started
    assert [r.value for r in result[tp]] == [b"wake up"]
    assert elapsed < 20, f"poll returned after {elapsed:.1f}s: the fetch did not wake early"


async def test_offset_out_of_range_resets_per_policy(bootstrap: str) -> None:
    topic = "oor"
    await create_topic(bootstrap, topic)
    tp = TopicPartition(topic, 0)
    async with AsyncProducer(bootstrap) as producer:
        for i in range(5):
            await producer.send(topic, b"%d" % i)
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        got = await consumer.poll(5000)
        assert [r.offset for r in got[tp]] == [0, 1, 2, 3, 4]
    async with AsyncConsumer(bootstrap, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert await consumer.poll(300) == {}
        assert await consumer.position(tp) == 5
    async with AsyncConsumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError, match="1000"):
            await consumer.poll(5000)


async def test_seek_and_offsets(bootstrap: str) -> None:
    topic = "seek"
    await create_topic(bootstrap, topic)
    tp = TopicPartition(topic, 0)
    async with AsyncProducer(bootstrap, linger_ms=50) as producer:
        for i in range(10):
            producer.send_nowait(topic, b"%d" % i)
        await producer.flush()
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 10}
        consumer.seek(tp, 7)  # inside the one batch: records 0-6 are skipped
        got = await consumer.poll(5000)
        assert [r.value for r in got[tp]] == [b"7", b"8", b"9"]
        consumer.seek_to_beginning(tp)
        got = await consumer.poll(5000, max_records=4)
        assert [r.offset for r in got[tp]] == [0, 1, 2, 3]
        assert await consumer.position(tp) == 4
        consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 10


async def test_admin_create_list_describe_alter_delete(bootstrap: str) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        cluster = await admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [1] and cluster.controller_id == 1
        assert cluster.cluster_id
        await admin.create_topics([NewTopic("adm", 2, 1, {"retention.ms": "60000"})])
        with pytest.raises(TopicAlreadyExistsError, match="adm"):
            await admin.create_topics([NewTopic("adm", 2, 1)])
        assert "adm" in await admin.list_topics()
        [desc] = await admin.describe_topics(["adm"])
        assert [(p.partition, p.leader, p.replicas, p.isr) for p in desc.partitions] == [
            (0, 1, (1,), (1,)), (1, 1, (1,), (1,))]
        configs = await admin.describe_configs("adm")
        assert configs["retention.ms"].value == "60000"
        await admin.create_partitions({"adm": 4})
        [desc] = await admin.describe_topics(["adm"])
        assert len(desc.partitions) == 4
        await admin.delete_topics(["adm"])
        with trio.fail_after(10):
            while "adm" in await admin.list_topics():
                await trio.sleep(0.05)
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.describe_topics(["adm"])
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.delete_topics(["never-was"])


def test_blocking_facades_round_trip(bootstrap: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("blocking", 2, 1)])
        assert "blocking" in admin.list_topics()
    with Producer(bootstrap, acks="all", linger_ms=1) as producer:
        futures = [producer.send("blocking", b"v%d" % i, key=b"k%d" % i) for i in range(50)]
        producer.flush(timeout=20)
        metas = [f.result(timeout=5) for f in futures]
        assert producer.send_and_wait("blocking", b"last", partition=0).partition == 0
    assert all(m.offset >= 0 for m in metas)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("blocking", 0), TopicPartition("blocking", 1)])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 51 and time.monotonic() < deadline:
            for records in consumer.poll(1000).values():
                got.extend(records)
    assert sorted(r.value for r in got) == sorted([b"v%d" % i for i in range(50)] + [b"last"])
    # closed facades refuse work instead of hanging
    from raftka.client.errors import IllegalStateError

    with pytest.raises(IllegalStateError):
        consumer.poll(10)
