"""Growing a running cluster: broker-only nodes (`process.roles=broker`) join it, take over
partitions, survive a change of controller and a restart, and a drained one is left with
none, all under an acks=all load that loses nothing and stays in order.

One 3-voter cluster for the module, with `raftka cluster add-node`'s control socket served
here (the `cluster up` code path); node 4 comes from `raftka cluster add-node`, node 5 from
`raftka storage format` + `raftka server start` with a properties file, as an operator on
another machine would start it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, TopicPartition

from raftka.client.blocking import Admin
from raftka.testing.cluster_control import ControlServer, send
from raftka.testing.local_cluster import (
    FAST_FAILURE_DETECTION,
    READY_MARKER,
    LocalCluster,
    _child_env,
)
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    wait_partition,
)
from tests.integration.sdk_broker import RAFTKA, raftka_env
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SESSION_S = int(FAST_FAILURE_DETECTION["broker.session.timeout.ms"]) / 1000


def _raftka(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], capture_output=True, text=True, env=raftka_env(), timeout=timeout)


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("grow") / "data", 3, extra_config={
        **FAST_FAILURE_DETECTION, "leader.imbalance.check.interval.seconds": "2", "replica.lag.time.max.ms": "10000"})
    control = ControlServer(cluster, cluster.data_dir)
    try:
        cluster.start_and_wait(90)
        control.start()
        yield cluster
    finally:
        control.close()
        cluster.stop(timeout=30)
    # Stopping the cluster (Ctrl-C of `cluster up`) stops the added nodes too.
    assert all(not node.running for node in cluster.nodes.values())


class RoundRobinLoad:
    """acks=all, idempotent: numbered values over every partition of a topic until stopped;
    remembers, per partition, what was acknowledged, in acknowledgement order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failed: list[object] = []
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 90000, "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def total(self) -> int:
        return sum(map(len, self.acked.values()))

    def _delivered(self, err, msg) -> None:
        (self.failed.append(err) if err is not None else self.acked[msg.partition()].append(msg.value()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=b"v%06d" % n, partition=n % self.partitions,
                                   on_delivery=self._delivered)
            n += 1
            self._producer.poll(0.003)
        self._producer.flush(120)

    def __enter__(self) -> RoundRobinLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)

    def wait_more(self, count: int, what: str) -> None:
        at = self.total
        wait_until(lambda: self.total >= at + count, timeout=90, what=what)


def read_partitions(bootstrap: str, topic: str, expected: dict[int, int]) -> dict[int, list[bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "grow-check",
                                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in expected])
    read: dict[int, list[bytes]] = {p: [] for p in expected}
    try:
        def done() -> bool:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    read[msg.partition()].append(msg.value())
            return all(len(read[p]) >= n for p, n in expected.items())
        wait_until(done, timeout=90, interval=0, what=f"{sum(expected.values())} records read back")
    finally:
        consumer.close()
    return read


def replicas_of(cluster: LocalCluster, broker: int) -> list[tuple[str, int]]:
    with Admin(bootstrap_of(cluster)) as admin:
        return [(t.name, p.partition) for t in admin.describe_topics() for p in t.partitions if broker in p.replicas]


def test_an_added_broker_takes_over_partitions_under_load_and_a_drained_one_has_none(grown, tmp_path):
    cluster = grown
    create_topic(cluster, "grow", 4, 2, {"min.insync.replicas": "2"})
    boot = ["--bootstrap-server", cluster.bootstrap_servers]
    with RoundRobinLoad(cluster.bootstrap_servers, "grow", 4) as load:
        load.wait_more(200, "the load to get going")

        added = _raftka("cluster", "add-node", "--data-dir", str(cluster.data_dir))
        assert added.returncode == 0, added.stderr
        assert "node 4 (broker only) is serving at" in added.stdout
        assert "process.roles=broker\n" in (cluster.data_dir / "node-4" / "server.properties").read_text()
        status = _raftka("cluster", "status", "--data-dir", str(cluster.data_dir))
        assert status.returncode == 0, status.stderr
        assert any(line.startswith("node 4: running, pid ") and line.endswith(", broker only")
                   for line in status.stdout.splitlines()), status.stdout
        with Admin(bootstrap_of(cluster)) as admin:
            assert {b.node_id for b in admin.describe_cluster().brokers} == {1, 2, 3, 4}
        assert replicas_of(cluster, 4) == []  # nothing moves on its own

        # Move load onto it: kafka-reassign-partitions style, spread over all four brokers.
        (tmp_path / "topics.json").write_text('{"version":1,"topics":[{"topic":"grow"}]}')
        generated = _raftka("reassign", "generate", *boot, "--topics-to-move-json-file",
                            str(tmp_path / "topics.json"), "--broker-list", "1,2,3,4")
        assert generated.returncode == 0, generated.stderr
        lines = generated.stdout.splitlines()
        plan = lines[lines.index("Proposed partition reassignment configuration") + 1]
        (tmp_path / "plan.json").write_text(plan)
        assert any(p["replicas"][0] == 4 for p in json.loads(plan)["partitions"])  # it will lead one
        plan_args = [*boot, "--reassignment-json-file", str(tmp_path / "plan.json")]
        executed = _raftka("reassign", "execute", *plan_args)
        assert executed.returncode == 0, executed.stderr
        wait_until(lambda: _raftka("reassign", "verify", *plan_args).returncode == 0, timeout=120, interval=0.5,
                   what="the reassignment onto broker 4 to complete")
        for p in json.loads(plan)["partitions"]:
            wait_partition(cluster, "grow", lambda i, r=tuple(p["replicas"]): i.replicas == r and set(i.isr) == set(r),
                           partition=p["partition"], timeout=60, what=f"grow-{p['partition']} on {p['replicas']}")
        # Preferred-leader balancing hands broker 4 the partitions it comes first in.
        wait_until(lambda: any(partition_info(cluster, "grow", p).leader == 4 for p in range(4)), timeout=60,
                   what="broker 4 to lead a partition")
        load.wait_more(300, "writes to go on with broker 4 leading")

        drained = _raftka("brokers", "drain", *boot, "--node", "4", "--timeout", "120")
        assert drained.returncode == 0, drained.stderr
        assert "Broker 4 is drained" in drained.stdout
        load.wait_more(200, "writes to go on after the drain")
    assert not load.failed, load.failed[:5]
    assert replicas_of(cluster, 4) == []
    wait_until(lambda: not list((cluster.nodes[4].directory / "data").glob("grow-*")), timeout=60,
               what="broker 4 to delete its logs of grow")
    read = read_partitions(cluster.bootstrap_servers, "grow", {p: len(v) for p, v in load.acked.items()})
    for p, acked in load.acked.items():
        assert read[p] == acked, f"grow-{p}: lost, duplicated or reordered records"


class HandStartedBroker:
    """`raftka storage format` + `raftka server start --config` of a broker-only node, from a
    properties file as an operator writes it."""

    def __init__(self, cluster: LocalCluster, node_id: int) -> None:
        self.directory = cluster.data_dir / f"node-{node_id}"
        self.directory.mkdir()
        port = cluster.port_base + 100 * (node_id - 1)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.quorum_port}" for n in cluster.nodes.values() if not n.broker_only)
        secret = dict(line.split("=", 1) for line in (cluster.data_dir / "cluster.properties").read_text().split())
        self.config = self.directory / "server.properties"
        self.config.write_text(
            f"node.id={node_id}\nprocess.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
            f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n"
            f"controller.quorum.secret={secret['controller.quorum.secret']}\n"
            f"log.dirs={self.directory / 'data'}\n"
            + "".join(f"{k}={v}\n" for k, v in FAST_FAILURE_DETECTION.items()))
        formatted = _raftka("storage", "format", "--config", str(self.config), "--cluster-id", cluster.cluster_id)
        assert formatted.returncode == 0, formatted.stderr
        self.ready = threading.Event()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.ready.clear()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "raftka", "server", "start", "--config", str(self.config)],
            stdout=subprocess.PIPE, stderr=open(self.directory / "server.log", "a"),  # noqa: SIM115
            text=True, env=_child_env("INFO"))
        threading.Thread(target=self._watch, args=(self.process.stdout,), daemon=True).start()
        wait_until(lambda: self.ready.is_set() or self.process.poll() is not None, timeout=90,
                   what="the broker-only node to serve")
        assert self.process.poll() is None, (self.directory / "server.log").read_text()[-3000:]

    def _watch(self, stream) -> None:
        for line in stream:
            if READY_MARKER in line:
                self.ready.set()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _live(cluster: LocalCluster) -> tuple[int, set[int]]:
    with Admin(bootstrap_of(cluster)) as admin:
        described = admin.describe_cluster()
    return described.controller_id, {b.node_id for b in described.brokers}


def test_broker_only_nodes_survive_a_controller_change_and_their_restart(grown):
    cluster = grown
    if 4 not in cluster.nodes:  # run alone: add node 4 the way the first test does
        assert send(cluster.data_dir, "add-node")["ok"]
    hand = HandStartedBroker(cluster, 5)
    try:
        hand.start()
        wait_until(lambda: {4, 5} <= _live(cluster)[1], timeout=60, what="brokers 4 and 5 live")

        # A partition on the two broker-only nodes alone: they replicate it and one leads it.
        create_topic(cluster, "pair", 1, 2, {"min.insync.replicas": "2"})
        tp = TopicPartition("pair", 0)
        with KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000) as admin:
            assert admin.alter_partition_reassignments({tp: [5, 4]}) == {tp: None}
        wait_partition(cluster, "pair", lambda p: p.replicas == (5, 4) and set(p.isr) == {4, 5} and p.leader in (4, 5),
                       timeout=90, what="pair-0 on brokers 5 and 4, both in sync")
        sent: list[bytes] = []
        with RoundRobinLoad(cluster.bootstrap_servers, "pair", 1) as load:
            load.wait_more(100, "writes to pair-0")

            # The controller (a voter) dies: the broker-only nodes follow the new one, keep
            # their sessions (heartbeats reach it) and keep serving.
            controller, _ = _live(cluster)
            cluster.kill(controller)
            wait_until(lambda: _live(cluster)[0] not in (controller, -1, None), timeout=60,
                       what="a new controller")
            load.wait_more(100, "writes after the controller change")
            # Two whole sessions at the new controller: neither is fenced.
            watch_from, dropped = time.monotonic(), set()

            def watched() -> bool:
                dropped.update({4, 5} - _live(cluster)[1])
                return time.monotonic() - watch_from >= 2 * SESSION_S

            wait_until(watched, timeout=90, interval=0.2, what="two session timeouts watched")
            assert not dropped, f"broker(s) {sorted(dropped)} dropped out of the live brokers"

            # The broker-only node restarts (`cluster restart --node 4`) and rejoins the ISR.
            restarted = _raftka("cluster", "restart", "--node", "4", "--data-dir", str(cluster.data_dir))
            assert restarted.returncode == 0, restarted.stderr
            wait_partition(cluster, "pair", lambda p: set(p.isr) == {4, 5}, timeout=90, exclude={controller},
                           what="broker 4 back in the ISR of pair-0")
            load.wait_more(100, "writes after broker 4's restart")
            sent = load.acked[0]
        assert not load.failed, load.failed[:5]
        cluster.start_node(controller, wait=True, timeout=90)
        read = read_partitions(cluster.bootstrap_servers, "pair", {0: len(sent)})
        assert read[0] == sent
    finally:
        hand.stop()

