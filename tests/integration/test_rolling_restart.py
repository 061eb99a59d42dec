"""A rolling restart under an acks=all load: nothing lost, and no wait for the stopped node (#27).

Three real nodes, a topic of 3 partitions, RF 3, min.insync.replicas 2, and an idempotent
acks=all producer running throughout. Every node in turn is stopped cleanly (SIGTERM: a
controlled shutdown) and started again; then every node in turn is killed (kill -9) and
started again. Each time, while the node is still down, a record sent to every partition
after the node went down must be acknowledged: the leaders stop waiting for the stopped or
dead follower once the controller has fenced it and taken it out of the ISR (KIP-841), not
when the node comes back or its replica.lag.time.max.ms runs out. At the end, every
acknowledged record is read back, at its offset, in the order it was sent, exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import confluent_kafka
import pytest

from raftka.client.blocking import Admin
from raftka.testing.local_cluster import LocalCluster
from tests.integration.cluster_support import running_cluster
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "rolling"
PARTITIONS = 3
# Kafka's default is 30 s; 120 s here, so that a lagging follower's expiry cannot be what
# lets acks=all go on within DOWN_DEADLINE_S: only the fence can.
LAG_MS = 120_000
# How long a node stays down at most, waiting for the acknowledgements that prove the
# producer goes on without it (a deadline for a condition, well under LAG_MS).
DOWN_DEADLINE_S = 45.0
IN_FLIGHT = 300  # records the load keeps unacknowledged at most: a steady, modest load


@dataclass
class Ack:
    offset: int
    seq: int  # the send's position among the sends to its partition
    sent_at: float  # time.monotonic() of the produce() call


@dataclass
class Load:
    """An idempotent acks=all producer on its own thread, sending to every partition in turn
    until stopped, recording every acknowledgement and every delivery error."""

    bootstrap: str
    acks: dict[int, list[Ack]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    errors: list[str] = field(default_factory=list)
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="acks-all-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 600_000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0})
        seqs = [0] * PARTITIONS
        try:
            while not self._stop.is_set():
                if len(producer) < IN_FLIGHT:
                    for p in range(PARTITIONS):
                        now = time.monotonic()
                        producer.produce(TOPIC, value=f"{p}:{seqs[p]}".encode(), partition=p,
                                         on_delivery=lambda err, msg, s=seqs[p], t=now: self._delivered(err, msg, s, t))
                        seqs[p] += 1
                        self.sent += 1
                producer.poll(0.01)  # serves delivery callbacks; paces the load
            left = producer.flush(120)
            if left:
                self.errors.append(f"{left} records still unacknowledged 120 s after the load stopped")
        except Exception as exc:  # the test fails on it, rather than the thread dying silently
            self.errors.append(f"load thread: {exc!r}")

    def _delivered(self, err, msg, seq: int, sent_at: float) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(f"partition {msg.partition()} seq {seq}: {err}")
            else:
                self.acks[msg.partition()].append(Ack(msg.offset(), seq, sent_at))

    def acked_since(self, since: float) -> dict[int, int]:
        """Per partition, how many records sent at or after `since` are acknowledged."""
        with self._lock:
            return {p: sum(1 for a in acks if a.sent_at >= since) for p, acks in self.acks.items()}

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(180)
        assert not self._thread.is_alive(), "the load's producer did not finish flushing"


def _isr_sizes(cluster: LocalCluster) -> list[int]:
    with Admin(cluster.bootstrap) as admin:
        (desc,) = admin.describe_topics([TOPIC])
    return [len(p.isr) for p in sorted(desc.partitions, key=lambda p: p.partition)]


def _full_isr(cluster: LocalCluster) -> None:
    wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout=90, interval=0.2,
               what="every partition back to a full ISR")


def _goes_on_without(cluster: LocalCluster, load: Load, node_id: int, how: str) -> None:
    """The node is down now: acks=all goes on without it, on every partition, before it is
    started again."""
    down_at = time.monotonic()
    assert not cluster.nodes[node_id].running
    try:
        wait_until(lambda: all(n > 0 for n in load.acked_since(down_at).values()), timeout=DOWN_DEADLINE_S,
                   interval=0.05, what=f"acks=all records sent after node {node_id}'s {how} to be acknowledged "
                                       "on every partition while it is down")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; acknowledged per partition: {load.acked_since(down_at)}") from None
    assert not cluster.nodes[node_id].running, "the node came back before the producer went on"
    assert load.errors == [], load.errors[:5]


def _read_back(bootstrap: str, ends: dict[int, int]) -> dict[int, dict[int, bytes]]:
    """Every record of every partition below `ends` (offset -> value)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "rolling-check",
                                         "enable.auto.commit": False, "log_level": 0})
    out: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    next_offset = dict.fromkeys(range(PARTITIONS), 0)
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

        def done() -> bool:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    out[msg.partition()][msg.offset()] = msg.value()
                    next_offset[msg.partition()] = max(next_offset[msg.partition()], msg.offset() + 1)
            return all(next_offset[p] >= ends[p] for p in ends)

        wait_until(done, timeout=120, interval=0, what="every partition read back to its end")
    finally:
        consumer.close()
    return out


def test_rolling_restart_and_kills_under_acks_all_lose_nothing_and_never_wait_for_the_down_node(tmp_path):
    with running_cluster(tmp_path, nodes=3, extra={"replica.lag.time.max.ms": str(LAG_MS)}) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        load = Load(cluster.bootstrap_servers)
        load.start()
        try:
            wait_until(lambda: all(n > 0 for n in load.acked_since(0).values()), timeout=30,
                       what="the load's first acknowledgements")
            for node_id in sorted(cluster.nodes):  # a rolling restart: clean stops
                assert cluster.stop_node(node_id) == 0, f"node {node_id}'s clean stop did not exit 0"
                _goes_on_without(cluster, load, node_id, "clean stop")
                cluster.start_node(node_id, wait=True, timeout=90)
                _full_isr(cluster)
            for node_id in sorted(cluster.nodes):  # then crashes
                cluster.kill(node_id)
                _goes_on_without(cluster, load, node_id, "kill -9")
                cluster.start_node(node_id, wait=True, timeout=90)
                _full_isr(cluster)
        finally:
            load.stop()
        assert load.errors == [], load.errors[:5]

        acks = load.acks
        assert sum(len(a) for a in acks.values()) == load.sent
        ends = {p: max(a.offset for a in acks[p]) + 1 for p in acks}
        log = _read_back(cluster.bootstrap_servers, ends)
        for p, partition_acks in acks.items():
            missing = [a for a in partition_acks if log[p].get(a.offset) != f"{p}:{a.seq}".encode()]
            assert not missing, (f"partition {p}: {len(missing)} acknowledged records not read back at their "
                                 f"offsets, e.g. seq {missing[0].seq} at {missing[0].offset}: "
                                 f"{log[p].get(missing[0].offset)!r}")
            by_offset = [a.seq for a in sorted(partition_acks, key=lambda a: a.offset)]
            assert by_offset == sorted(by_offset), f"partition {p}: acknowledged records out of send order"
            twice = [v for v, n in Counter(log[p].values()).items() if n > 1]
            assert not twice, f"partition {p}: records written twice, e.g. {twice[:3]}"
