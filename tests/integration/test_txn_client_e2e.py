"""Transactions end to end on a real 3-node cluster, from the client side: the SDK's
transactional producer (blocking and trio), read_committed vs read_uncommitted consumers
(SDK and confluent-kafka), consume-transform-produce with send_offsets_to_transaction,
zombie fencing, and the `raftka transactions` / `raftka consume --isolation-level` CLI."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from raftka.client.blocking import Consumer, Producer
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import FatalTransactionError, KafkaError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from raftka.client.transactions import TxnState
from raftka.testing.local_cluster import LocalCluster
from tests.integration.cluster_support import create_topic, running_cluster
from tests.integration.sdk_broker import raftka_env
from tests.support import wait_until

# Kept small so the internal topics are quick to create on a loaded machine.
EXTRA = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
         "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("txn"), 3, extra=EXTRA, timeout=90) as c:
        yield c


def _topic(cluster: LocalCluster, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name, partitions)
    return name


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
              expect: int) -> list[bytes]:
    """Every value of `topic` from offset 0 up to its end for `isolation` (LSO or HW)."""
    with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: list[tuple[int, int, bytes]] = []

        def done() -> bool:
            for rs in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset, r.value) for r in rs)
            return len(got) >= expect and all(consumer.position(tp) >= ends[tp] for tp in tps)

        wait_until(done, timeout=60, what=f"{expect} {isolation} records of {topic}")
        return [v for _, _, v in sorted(got)]


def test_commit_and_abort_as_seen_by_both_isolation_levels(cluster: LocalCluster) -> None:
    topic = _topic(cluster)
    with Producer(cluster.bootstrap, transactional_id=f"t-{topic}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"c1", partition=0)
        producer.send(topic, b"c2", partition=1)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"a1", partition=0)
        producer.send(topic, b"a2", partition=1)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"c3", partition=0)
        producer.commit_transaction()
    committed = _read_all(cluster.bootstrap, topic, 2, "read_committed", 3)
    assert sorted(committed) == [b"c1", b"c2", b"c3"]
    everything = _read_all(cluster.bootstrap, topic, 2, "read_uncommitted", 5)
    assert sorted(everything) == [b"a1", b"a2", b"c1", b"c2", b"c3"]

    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "enable.partition.eof": False})
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []

        def three() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
            return len(seen) >= 3

        wait_until(three, timeout=60, what="confluent-kafka read_committed records")
        extra = consumer.poll(2.0)
        assert extra is None or extra.error() is not None, extra.value()
        assert sorted(seen) == [b"c1", b"c2", b"c3"]
    finally:
        consumer.close()


def test_confluent_kafka_transactions_read_by_the_sdk(cluster: LocalCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(cluster)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                         "transactional.id": f"ck-{topic}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"x1", partition=0)
    producer.produce(topic, b"x2", partition=1)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(topic, b"y1", partition=1)
    producer.commit_transaction(60)
    assert _read_all(cluster.bootstrap, topic, 2, "read_committed", 1) == [b"y1"]


def test_consume_transform_produce_is_exactly_once(cluster: LocalCluster) -> None:
    source, sink = _topic(cluster), _topic(cluster)
    group = f"ctp-{source}"
    with Producer(cluster.bootstrap, acks="all") as plain:
        for i in range(20):
            plain.send(source, b"%d" % i, partition=i % 2)
        plain.flush()

    async def pipeline() -> None:
        async with AsyncConsumer(cluster.bootstrap, group_id=group, isolation_level="read_committed",
                                 enable_auto_commit=False, auto_offset_reset="earliest") as consumer, \
                AsyncProducer(cluster.bootstrap, transactional_id=f"ctp-{source}") as producer:
            await producer.init_transactions()
            consumer.subscribe([source])
            copied, rounds = 0, 0
            with trio.fail_after(120):
                while copied < 20:
                    batch = await consumer.poll(timeout_ms=500, max_records=7)
                    if not batch:
                        continue
                    rounds += 1
                    producer.begin_transaction()
                    for tp, records in batch.items():
                        for r in records:
                            producer.send_nowait(sink, r.value.upper(), partition=tp.partition)
                    offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items()}
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                    if rounds == 2:  # one aborted round: its inputs are read again
                        await producer.abort_transaction()
                        for tp in offsets:
                            committed = await consumer.committed(tp)
                            consumer.seek(tp, 0 if committed is None else committed)
                        continue
                    await producer.commit_transaction()
                    copied += sum(len(rs) for rs in batch.values())
            assert producer.transaction_state is TxnState.READY
            # Right after EndTxn the COMMIT marker may still be on its way to
            # __consumer_offsets: a read_committed consumer asks for stable offsets
            # (OffsetFetch v7 require_stable) and waits out UNSTABLE_OFFSET_COMMIT.
            for p in (0, 1):
                assert await consumer.committed(TopicPartition(source, p)) == 10

    trio.run(pipeline)
    out = _read_all(cluster.bootstrap, sink, 2, "read_committed", 20)
    assert sorted(out, key=int) == [b"%d" % i for i in range(20)]


def test_a_second_producer_fences_the_first(cluster: LocalCluster) -> None:
    topic = _topic(cluster)
    with Producer(cluster.bootstrap, transactional_id=f"z-{topic}", max_block_ms=30000) as old:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0)
        old.flush()
        with Producer(cluster.bootstrap, transactional_id=f"z-{topic}") as new:
            new.init_transactions()  # fences `old` and aborts its open transaction
            new.begin_transaction()
            new.send(topic, b"fresh", partition=0)
            new.commit_transaction()
        with pytest.raises(FatalTransactionError) as info:
            old.commit_transaction()
        assert info.value.fatal and info.value.code in (47, 90)
    assert _read_all(cluster.bootstrap, topic, 2, "read_committed", 1) == [b"fresh"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raftka", *args], capture_output=True, text=True,
                          env=raftka_env(), timeout=120)


def test_cli_lists_describes_and_aborts_a_hanging_transaction(cluster: LocalCluster,
                                                              tmp_path: Path) -> None:
    topic = _topic(cluster, partitions=1)
    txn_id = f"cli-{topic}"
    with Producer(cluster.bootstrap, transactional_id=txn_id) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0)
        producer.flush()
        listed = _cli("transactions", "list", "--bootstrap-server", cluster.bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert txn_id in listed.stdout and "Ongoing" in listed.stdout, listed.stdout
        described = _cli("transactions", "describe", "--bootstrap-server", cluster.bootstrap,
                         "--transactional-id", txn_id)
        assert described.returncode == 0, described.stderr
        assert f"{topic}-0" in described.stdout and "Ongoing" in described.stdout
        producers = _cli("transactions", "describe-producers", "--bootstrap-server",
                         cluster.bootstrap, "--topic", topic, "--partition", "0")
        assert producers.returncode == 0, producers.stderr
        assert producers.stdout.splitlines()[1].split()[-1] == "0", producers.stdout
        wrong = _cli("transactions", "abort", "--bootstrap-server", cluster.bootstrap,
                     "--topic", topic, "--partition", "0", "--start-offset", "7")
        assert wrong.returncode == 1 and "no open transaction starts at offset 7" in wrong.stderr
        aborted = _cli("transactions", "abort", "--bootstrap-server", cluster.bootstrap,
                       "--topic", topic, "--partition", "0", "--start-offset", "0")
        assert aborted.returncode == 0, aborted.stderr
        # The marker moved the last stable offset past the transaction; nothing is visible.
        with Consumer(cluster.bootstrap, isolation_level="read_committed") as reader:
            tp = TopicPartition(topic, 0)
            assert wait_until(lambda: reader.end_offsets([tp])[tp] == 2, timeout=30,
                              what="the LSO past the aborted transaction")
        consumed = _cli("consume", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                        "--from-beginning", "--timeout-ms", "3000", "--isolation-level",
                        "read_committed")
        assert consumed.returncode == 0 and consumed.stdout == "", consumed.stdout
        uncommitted = _cli("consume", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                           "--from-beginning", "--max-messages", "1")
        assert uncommitted.stdout.strip() == "open", uncommitted
        try:
            producer.abort_transaction()
        except KafkaError:
            pass  # the coordinator may already see the transaction as fenced or ended
