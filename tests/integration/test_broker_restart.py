"""Acknowledged data survives a server crash (kill -9) and a clean restart (SIGTERM).

A real raftka process is killed and restarted on the same data dirs and
ports. Every message acknowledged with acks=all is read back afterwards at the
offset it was acknowledged at, in order; new writes continue at the log end;
the idempotent-producer state is rebuilt from the log (a retried batch is
recognised as a duplicate, a sequence gap is refused) and producer ids are
never handed out twice.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from raftka.client.protocol import ErrorCode
from tests.compat.server_process import ServerProcess
from tests.compat.wire_client import WireConnection, values_batch
from tests.support import wait_until

TOPIC = "durable"
PARTITIONS = 3
TIMEOUT = 30.0


@pytest.fixture
def server(tmp_path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path)
    try:
        process.start()
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, PARTITIONS) == 0
        yield process
    finally:
        process.stop()


@dataclass
class StreamingProducer:
    """An idempotent librdkafka producer sending unique values in a thread until stopped."""

    bootstrap: str
    acked: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, offset, value)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        """Stop sending, wait for every outstanding delivery report."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(TIMEOUT + 10)
            assert not self.thread.is_alive(), "the producer thread did not finish"

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "compression.type": "lz4", "reconnect.backoff.max.ms": 200})

        def report(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))

        while not self.stop.is_set():
            for _ in range(20):
                key = f"k{self.sent % 11}".encode()
                producer.produce(TOPIC, key=key, value=f"m-{self.sent}".encode(), on_delivery=report)
                self.sent += 1
            producer.poll(0.005)  # serve delivery reports; also paces the loop
        remaining = producer.flush(TIMEOUT)
        if remaining:
            self.errors.append(f"{remaining} messages undelivered after {TIMEOUT}s")


@pytest.fixture
def streaming(server: ServerProcess) -> Iterator[StreamingProducer]:
    producer = StreamingProducer(server.bootstrap)
    producer.start()
    try:
        yield producer
    finally:
        producer.finish()


def read_partitions(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition's (offset, value) list, read with librdkafka from the beginning."""
    with WireConnection(bootstrap) as conn:
        ends = {p: conn.end_offset(TOPIC, p) for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-check",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

        def caught_up() -> bool:
            for msg in consumer.consume(5000, 0.2):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append((msg.offset(), msg.value()))
            return all(len(out[p]) >= ends[p] for p in range(PARTITIONS))

        wait_until(caught_up, timeout=TIMEOUT, what=f"{TOPIC} read up to {ends}")
    finally:
        consumer.close()
    return out


def check_log_holds(bootstrap: str, acked: list[tuple[int, int, bytes]]) -> dict[int, int]:
    """Each acknowledged message is at its offset; offsets are dense; no value is stored twice;
    per partition the values keep their send order. The end offset of each partition."""
    ends = {}
    for partition, stored in read_partitions(bootstrap).items():
        assert [o for o, _ in stored] == list(range(len(stored))), "offsets are not dense"
        values = [v for _, v in stored]
        assert len(set(values)) == len(values), (
            f"partition {partition}: {len(values) - len(set(values))} duplicated values")
        sequence = [int(v.split(b"-")[1]) for v in values if v.startswith(b"m-")]
        assert sequence == sorted(sequence), f"partition {partition}: values out of send order"
        by_offset = dict(stored)
        wrong = [(o, v) for p, o, v in acked if p == partition and by_offset.get(o) != v]
        assert not wrong, f"partition {partition}: acknowledged messages missing: {wrong[:5]}"
        ends[partition] = len(stored)
    return ends


def test_acknowledged_messages_survive_kill_9(server: ServerProcess,
                                             streaming: StreamingProducer) -> None:
    # Raw idempotent writes whose retry after the crash must be recognised.
    with WireConnection(server.bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        first = conn.produce(TOPIC, 0, values_batch([f"raw-{i}".encode() for i in range(10)],
                                                    producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=0))
        assert first.error_code == 0
    wait_until(lambda: len(streaming.acked) >= 3000, timeout=TIMEOUT,
               what="3000 acknowledged messages before the crash")
    old_pid = server.pid
    acked_before_kill = len(streaming.acked)
    server.kill()  # while the producer is mid-stream
    server.start()
    assert server.pid != old_pid
    wait_until(lambda: len(streaming.acked) >= acked_before_kill + 2000, timeout=TIMEOUT,
               what="2000 more acknowledged messages after the restart")
    streaming.finish()
    assert len(streaming.acked) == streaming.sent
    assert not streaming.errors, f"producer errors across the crash: {streaming.errors[:5]}"
    ends = check_log_holds(server.bootstrap, streaming.acked)

    with WireConnection(server.bootstrap) as conn:
        # The producer state was rebuilt from the log: a retried batch is a duplicate...
        retry = conn.produce(TOPIC, 0, values_batch([f"raw-{i}".encode() for i in range(10)],
                                                    producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=0))
        assert (retry.error_code, retry.base_offset) == (0, first.base_offset)
        assert conn.end_offset(TOPIC, 0) == ends[0]
        # ... a gap in the sequence is refused, and the next batch is appended at the end.
        gap = conn.produce(TOPIC, 0, values_batch([b"gap"], producer_id=pid,
                                                  producer_epoch=epoch, base_sequence=50))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        following = conn.produce(TOPIC, 0, values_batch([b"raw-10"], producer_id=pid,
                                                        producer_epoch=epoch, base_sequence=10))
        assert (following.error_code, following.base_offset) == (0, ends[0])
        # Producer ids are allocated through the metadata quorum: never reused after a crash.
        new_pid, _ = conn.init_producer_id()
        assert new_pid != pid
    # A new client producer works and continues at the end of every partition.
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    offsets: dict[int, list[int]] = defaultdict(list)
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, value=b"after", partition=partition,
                         on_delivery=lambda err, msg: offsets[msg.partition()].append(msg.offset()))
    assert producer.flush(TIMEOUT) == 0
    assert offsets == {0: [ends[0] + 1], 1: [ends[1]], 2: [ends[2]]}


def test_clean_restart_keeps_everything(server: ServerProcess) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                         "enable.idempotence": True, "compression.type": "zstd", "linger.ms": 5,
                         "reconnect.backoff.max.ms": 200})
    acked: list[tuple[int, int, bytes]] = []

    def report(err, msg) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    for i in range(3000):
        producer.produce(TOPIC, key=f"k{i % 13}".encode(), value=f"m-{i}".encode(),
                         on_delivery=report)
    assert producer.flush(TIMEOUT) == 0
    assert server.stop() == 0, "SIGTERM should shut the server down cleanly (exit 0)"
    server.start()
    ends = check_log_holds(server.bootstrap, acked)
    assert sum(ends.values()) == 3000
    # The same producer reconnects and carries on (its state survived the restart).
    for i in range(3000, 3100):
        producer.produce(TOPIC, key=f"k{i % 13}".encode(), value=f"m-{i}".encode(),
                         on_delivery=report)
    assert producer.flush(TIMEOUT) == 0
    ends = check_log_holds(server.bootstrap, acked)
    assert sum(ends.values()) == 3100
