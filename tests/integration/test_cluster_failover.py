"""A real 3-node cluster: committed messages survive a leader crash, a controlled
shutdown and a controller crash (real processes, confluent-kafka as the client)."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.support import wait_until

pytestmark = pytest.mark.slow


class Load:
    """An idempotent acks=all producer whose deliveries are recorded in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[tuple[int, int]] = []  # (value, offset) in delivery order
        self.errors: list[str] = []
        self.first_ack_after: dict[float, float] = {}
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 0,  # connection-refused chatter from the killed broker is expected
        })

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((int(msg.value()), msg.offset()))

    def send(self, count: int, start: int = 0, per_poll: int = 20) -> None:
        for i in range(start, start + count):
            self.producer.produce(self.topic, value=str(i).encode(), on_delivery=self._delivered)
            if i % per_poll == 0:
                self.producer.poll(0.005)  # pacing: spread the load over time

    def flush(self, timeout: float = 60.0) -> None:
        assert self.producer.flush(timeout) == 0, "messages still undelivered after flush"

    def close(self) -> None:
        self.producer.flush(0)
        del self.producer  # librdkafka stops its threads when the handle goes away


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[tuple[int, int]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
                                         "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen.append((int(msg.value()), msg.offset()))
    finally:
        consumer.close()
    return seen


def assert_exactly_once_in_order(load: Load, seen: list[tuple[int, int]]) -> None:
    values = [v for v, _ in seen]
    assert len(values) == len(set(values)), "a value appears at more than one offset"
    assert values == sorted(values), "values are not in send order"
    offsets = [o for _, o in seen]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    acked = {v: o for v, o in load.acked}
    by_value = dict(seen)
    missing = [v for v in acked if v not in by_value]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    moved = [v for v, o in acked.items() if by_value[v] != o]
    assert not moved, f"acknowledged offsets changed for {moved[:5]}"


def test_leader_crash_loses_no_acknowledged_message(tmp_path):
    with running_cluster(tmp_path) as cluster:
        create_topic(cluster, "ha", 1, 3, {"min.insync.replicas": "2"})
        leader = partition_info(cluster, "ha").leader
        load = Load(cluster.bootstrap_servers, "ha")
        load.send(1500)
        cluster.kill(leader)
        killed_at = time.monotonic()
        load.send(1500, start=1500)
        new = wait_partition(cluster, "ha", lambda p: p.leader not in (-1, leader), exclude={leader},
                             what="a new leader after the crash")
        elected_in = time.monotonic() - killed_at
        load.flush()
        assert not load.errors, load.errors[:3]
        assert new.leader_epoch >= 1
        # Session timeout (3 s) plus election, with slack for a loaded 2-core machine.
        assert elected_in < 15, f"new leader after {elected_in:.1f}s"
        seen = read_all(bootstrap_of(cluster), "ha", 3000)
        assert_exactly_once_in_order(load, seen)
        assert len(seen) == 3000
        # The crashed broker comes back, catches up and rejoins the ISR.
        cluster.start_node(leader)
        wait_partition(cluster, "ha", lambda p: leader in p.isr, timeout=40, what="the old leader back in the ISR")


def test_controlled_shutdown_is_invisible_to_acks_all_producers(tmp_path):
    with running_cluster(tmp_path) as cluster:
        create_topic(cluster, "planned", 1, 3, {"min.insync.replicas": "2"})
        leader = partition_info(cluster, "planned").leader
        load = Load(cluster.bootstrap_servers, "planned")
        load.send(1000)
        assert cluster.stop_node(leader) == 0, "the broker did not exit cleanly"
        load.send(1000, start=1000)
        load.flush()
        assert not load.errors, load.errors[:3]
        info = partition_info(cluster, "planned", exclude={leader})
        assert info.leader not in (-1, leader)
        assert leader not in info.isr
        seen = read_all(bootstrap_of(cluster), "planned", 2000)
        assert_exactly_once_in_order(load, seen)
        assert len(seen) == 2000


def test_controller_crash_then_broker_crash_still_handled(tmp_path):
    with running_cluster(tmp_path) as cluster:
        create_topic(cluster, "ctl", 3, 3, {"min.insync.replicas": "2"})
        from raftka.client.blocking import Admin

        with Admin(cluster.bootstrap_servers) as admin:
            controller = admin.describe_cluster().controller_id
        assert controller in cluster.nodes
        cluster.kill(controller)

        def new_controller():
            with Admin(bootstrap_of(cluster, {controller})) as admin:
                c = admin.describe_cluster().controller_id
                return c if c not in (-1, controller) else None

        successor = wait_until(new_controller, timeout=30, what="a new active controller")
        # The dead controller's leaderships moved (it was fenced by the new controller).
        for p in range(3):
            wait_partition(cluster, "ctl", lambda i: i.leader not in (-1, controller), partition=p,
                           exclude={controller}, what=f"ctl-{p} led by a live broker")
        # The old controller comes back as a plain voter; then a later broker crash is
        # handled by the new controller (the quorum keeps its majority: 2 of 3 voters).
        cluster.start_node(controller)
        cluster.wait_live_brokers(set(cluster.nodes), timeout=30)
        victim = next(i for i in cluster.nodes if i not in (controller, successor))
        cluster.kill(victim)
        for p in range(3):
            wait_partition(cluster, "ctl", lambda i: i.leader not in (-1, victim) and victim not in i.isr,
                           partition=p, exclude={victim}, what=f"ctl-{p} moved off the crashed broker")
        with Admin(bootstrap_of(cluster, {victim})) as admin:
            assert admin.describe_cluster().controller_id == successor


def test_sdk_producer_and_consumer_survive_a_leader_crash(tmp_path):
    from raftka.client.blocking import Consumer, Producer
    from raftka.client.records import TopicPartition

    with running_cluster(tmp_path) as cluster:
        create_topic(cluster, "sdk-ha", 1, 3, {"min.insync.replicas": "2"})
        leader = partition_info(cluster, "sdk-ha").leader
        with Producer(cluster.bootstrap_servers, acks="all", enable_idempotence=True,
                      linger_ms=2) as producer:
            futures = [producer.send("sdk-ha", str(i).encode()) for i in range(500)]
            cluster.kill(leader)
            futures += [producer.send("sdk-ha", str(i).encode()) for i in range(500, 1000)]
            producer.flush(60)
            offsets = [f.result(timeout=60).offset for f in futures]
        assert offsets == sorted(offsets) and len(set(offsets)) == 1000, "acks out of order or duplicated"
        with Consumer(bootstrap_of(cluster, {leader}), auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("sdk-ha", 0)])
            values: list[int] = []
            deadline = time.monotonic() + 30
            while len(values) < 1000 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values.extend(int(r.value) for r in records)
        assert values == list(range(1000))
