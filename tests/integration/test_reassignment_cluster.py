"""Partition reassignment (KIP-455) on a real 3-node cluster, driven by kafka-python's admin
calls, under a steady acks=all load: nothing acknowledged is lost, and the partition ends
with the target replica set, a full ISR, and no log left on the removed broker."""

from __future__ import annotations

import json
import subprocess
import threading

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from raftka.client.blocking import Admin
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.integration.sdk_broker import RAFTKA, raftka_env
from tests.support import wait_until

pytestmark = pytest.mark.slow


class SteadyProducer:
    """acks=all, idempotent: sends numbered values until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[bytes] = []
        self.failed: list[object] = []
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        (self.failed.append(err) if err is not None else self.acked.append(msg.value()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=b"v%06d" % n, partition=0, on_delivery=self._delivered)
            n += 1
            self._producer.poll(0.002)
        self._producer.flush(90)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)


def consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reassign-check",
                                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        def done() -> bool:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value())
            return len(values) >= expected
        wait_until(done, timeout=60, interval=0, what=f"{expected} records read back")
    finally:
        consumer.close()
    return values


def test_reassign_moves_a_partition_under_acks_all_load_and_loses_nothing(tmp_path):
    with running_cluster(tmp_path, nodes=3, extra={"replica.lag.time.max.ms": "10000"}) as cluster:
        create_topic(cluster, "moving", 1, 2, {"min.insync.replicas": "2"})
        before = partition_info(cluster, "moving")
        source = before.leader  # the leader leaves; the new broker comes first, so it takes over
        (new,) = set(cluster.nodes) - set(before.replicas)
        (stays,) = set(before.replicas) - {source}
        target = [new, stays]
        tp = TopicPartition("moving", 0)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
        try:
            # Errors first, as Kafka names them.
            assert admin.list_partition_reassignments() == {}
            refused = admin.alter_partition_reassignments({
                tp: None, TopicPartition("moving", 9): [1], TopicPartition("nope", 0): [1]})
            assert refused[tp] is NoReassignmentInProgressError
            assert refused[TopicPartition("moving", 9)] is UnknownTopicOrPartitionError
            assert refused[TopicPartition("nope", 0)] is UnknownTopicOrPartitionError
            bad = admin.alter_partition_reassignments({tp: [source, 42]})
            assert bad[tp] is InvalidReplicationAssignmentError
            bad = admin.alter_partition_reassignments({tp: [source, source]})
            assert bad[tp] is InvalidReplicationAssignmentError

            with SteadyProducer(cluster.bootstrap_servers, "moving") as load:
                wait_until(lambda: len(load.acked) >= 100, timeout=60, what="the load to get going")
                assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
                # The leader is removed too: it hands over once both targets are in sync.
                info = wait_partition(cluster, "moving",
                                      lambda p: tuple(p.replicas) == tuple(target) and set(p.isr) == set(target),
                                      timeout=90, what=f"replicas and ISR {target}")
                assert info.leader == new
                assert admin.list_partition_reassignments() == {}
                acked_at_move = len(load.acked)
                wait_until(lambda: len(load.acked) >= acked_at_move + 100, timeout=60,
                           what="writes to go on after the move")
            assert not load.failed, load.failed[:5]
            # The removed broker deleted its copy.
            wait_until(lambda: not (cluster.nodes[source].directory / "data" / "moving-0").exists(), timeout=30,
                       what=f"node {source} to delete its log of moving-0")
            read = consume_all(cluster.bootstrap_servers, "moving", len(load.acked))
            missing = set(load.acked) - set(read)
            assert not missing, sorted(missing)[:10]
            assert len(read) == len(set(read)), "an idempotent producer's records were duplicated"
        finally:
            admin.close()


def test_reorder_then_auto_leader_balance_and_cancel_a_reassignment_in_progress(tmp_path):
    """A target broker that is down cannot catch up: the reassignment stays in progress, is
    listed, and a cancellation (null replicas) puts the original replica back alone; a move to
    it that is not cancelled finishes once the broker is restarted, with every record."""
    with running_cluster(tmp_path, nodes=3, extra={"leader.imbalance.check.interval.seconds": "1"}) as cluster:
        # A reorder finishes at once and changes the preferred leader; the controller's automatic
        # preferred-leader balancing (auto.leader.rebalance.enable) then moves leadership to it.
        create_topic(cluster, "pref", 1, 2)
        first, second = partition_info(cluster, "pref").replicas
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers) as reorder:
            assert reorder.alter_partition_reassignments({TopicPartition("pref", 0): [second, first]}) == {
                TopicPartition("pref", 0): None}
        wait_partition(cluster, "pref", lambda p: p.replicas == (second, first) and p.leader == second,
                       timeout=30, what="leadership to follow the new preferred replica")

        create_topic(cluster, "stuck", 1, 1, {"min.insync.replicas": "1"})
        (source,) = partition_info(cluster, "stuck").replicas
        other = min(n for n in cluster.nodes if n != source)
        down = max(n for n in cluster.nodes if n != source)
        cluster.kill(down)  # still registered (fenced): a valid target that never catches up
        live = ",".join(cluster.nodes[n].bootstrap for n in (source, other))

        def settled() -> bool:  # kafka-python sends admin requests to the controller it is told of
            with Admin(live) as a:
                described = a.describe_cluster()
            return described.controller_id in (source, other) and down not in {b.node_id for b in described.brokers}

        wait_until(settled, timeout=30, what=f"a live controller and broker {down} fenced")
        tp = TopicPartition("stuck", 0)
        admin = KafkaAdminClient(bootstrap_servers=live, request_timeout_ms=30000)
        try:
            assert admin.alter_partition_reassignments({tp: [other, down]}) == {tp: None}
            ongoing = admin.list_partition_reassignments()
            assert ongoing == {tp: {"replicas": [other, down, source], "adding_replicas": [other, down],
                                    "removing_replicas": [source]}}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        info = wait_partition(cluster, "stuck", lambda p: tuple(p.replicas) == (source,), timeout=30,
                              exclude={down}, what="the original replica alone")
        assert info.leader == source and tuple(info.isr) == (source,)
        # The cancelled adding replica that did start (`other`) deletes its copy again.
        wait_until(lambda: not (cluster.nodes[other].directory / "data" / "stuck-0").exists(), timeout=30,
                   what=f"node {other} to delete its log of stuck-0")

        # A move to the dead broker again, not cancelled this time: it waits in the metadata, and
        # finishes once the broker is back, registers, catches up and joins the ISR.
        producer = confluent_kafka.Producer({"bootstrap.servers": live, "acks": "all", "log_level": 0})
        for i in range(50):
            producer.produce("stuck", value=b"s%02d" % i, partition=0)
        assert producer.flush(30) == 0
        with KafkaAdminClient(bootstrap_servers=live, request_timeout_ms=30000) as again:
            assert again.alter_partition_reassignments({tp: [down]}) == {tp: None}
        cluster.start_node(down, wait=True)
        info = wait_partition(cluster, "stuck", lambda p: p.replicas == (down,) and p.isr == (down,), timeout=60,
                              what=f"the move to broker {down} to finish after its restart")
        assert info.leader == down
        read = consume_all(cluster.bootstrap_servers, "stuck", 50)
        assert sorted(read) == [b"s%02d" % i for i in range(50)]


def _raftka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], capture_output=True, text=True, env=raftka_env(), timeout=120)


def test_raftka_reassign_and_drain_cli_move_every_partition_off_a_broker(tmp_path):
    """generate -> execute -> verify (until complete) -> cancel, kafka-reassign-partitions style:
    every partition leaves node 1, and the records written before are all still there. Then
    `raftka brokers drain --node 2` under an acks=all load leaves node 2 with no replica."""
    # Offsets topic with RF 2, so that broker 2 of 3 can be drained of it too.
    offsets = {"offsets.topic.replication.factor": "2", "offsets.topic.num.partitions": "4"}
    with running_cluster(tmp_path / "c", nodes=3, extra=offsets) as cluster:
        create_topic(cluster, "cli", 3, 1, {"min.insync.replicas": "1"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                             "log_level": 0})
        for i in range(90):
            producer.produce("cli", value=b"r%03d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        boot = ["--bootstrap-server", cluster.bootstrap_servers]
        (tmp_path / "topics.json").write_text('{"version":1,"topics":[{"topic":"cli"}]}')
        generated = _raftka("reassign", "generate", *boot, "--topics-to-move-json-file",
                            str(tmp_path / "topics.json"), "--broker-list", "2,3")
        assert generated.returncode == 0, generated.stderr
        lines = generated.stdout.splitlines()
        assert lines[0] == "Current partition replica assignment"
        plan = lines[lines.index("Proposed partition reassignment configuration") + 1]
        assert {tuple(p["replicas"])[0] for p in json.loads(plan)["partitions"]} <= {2, 3}
        (tmp_path / "plan.json").write_text(plan)
        plan_args = [*boot, "--reassignment-json-file", str(tmp_path / "plan.json")]
        executed = _raftka("reassign", "execute", *plan_args)
        assert executed.returncode == 0, executed.stderr
        assert "Save this to use as the --reassignment-json-file option during rollback" in executed.stdout
        assert "Successfully started partition reassignments for cli-0,cli-1,cli-2" in executed.stdout
        verified = wait_until(lambda: (lambda r: r if r.returncode == 0 else None)(
            _raftka("reassign", "verify", *plan_args)), timeout=90, interval=0.5, what="verify to report completion")
        assert verified.stdout.splitlines() == ["Status of partition reassignment:"] + [
            f"Reassignment of partition cli-{p} is completed." for p in range(3)] + [
            "Clearing broker-level throttles on brokers 1,2,3", "Clearing topic-level throttles on topic cli"]
        cancelled = _raftka("reassign", "cancel", *plan_args)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "No reassignment was in progress for: cli-0,cli-1,cli-2" in cancelled.stdout
        for p in range(3):
            info = partition_info(cluster, "cli", p)
            assert set(info.replicas) <= {2, 3} and info.leader in (2, 3)
        wait_until(lambda: not list((cluster.nodes[1].directory / "data").glob("cli-*")), timeout=30,
                   what="node 1 to delete its logs of cli")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
                                             "log_level": 0})
        consumer.assign([confluent_kafka.TopicPartition("cli", p, 0) for p in range(3)])
        read: list[bytes] = []
        try:
            wait_until(lambda: read.extend(m.value() for m in consumer.consume(100, timeout=0.5)
                                           if m.error() is None) or len(read) >= 90, timeout=60,
                       interval=0, what="the 90 records")
        finally:
            consumer.close()
        assert sorted(read) == [b"r%03d" % i for i in range(90)]

        # raftka brokers drain: node 2 ends with no replica, under an acks=all load.
        create_topic(cluster, "drain", 2, 2, {"min.insync.replicas": "2"})
        with SteadyProducer(cluster.bootstrap_servers, "drain") as load:
            wait_until(lambda: len(load.acked) >= 200, timeout=60, what="the load to get going")
            drained = _raftka("brokers", "drain", *boot, "--node", "2", "--timeout", "90")
            assert drained.returncode == 0, drained.stderr
            assert "Broker 2 is drained" in drained.stdout
            at_drain = len(load.acked)
            wait_until(lambda: len(load.acked) >= at_drain + 200, timeout=60, what="writes after the drain")
        assert not load.failed, load.failed[:5]
        for topic, partitions in (("cli", 3), ("drain", 2), ("__consumer_offsets", 4)):
            for p in range(partitions):
                info = partition_info(cluster, topic, p)
                assert 2 not in info.replicas and 2 not in info.isr, info
        read = consume_all(cluster.bootstrap_servers, "drain", len(load.acked))
        assert not set(load.acked) - set(read)

        # Then stop it and unregister it (kafka-cluster unregister); a second time is refused.
        cluster.stop_node(2)
        live = ["--bootstrap-server", bootstrap_of(cluster, {2})]
        unregistered = _raftka("brokers", "unregister", *live, "--id", "2")
        assert unregistered.returncode == 0, unregistered.stderr
        again = _raftka("brokers", "unregister", *live, "--id", "2")
        assert again.returncode == 1 and "BROKER_ID_NOT_REGISTERED" in again.stderr, again.stderr
        none_left = _raftka("brokers", "drain", *live, "--node", "2")
        assert none_left.returncode == 0 and "holds no replicas" in none_left.stdout, none_left
