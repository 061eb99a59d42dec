"""The controller's liveness probe: a crashed broker is fenced long before its session
expires, a paused (SIGSTOPped) one is not.

First with the controller, its quorum and the control RPC in this process (brokers are
ControlRpcClients, their "processes" real listening or closed ports), then with real
3-node clusters, kill -9 and SIGSTOP. Sessions are long (30 s) so that only the probe
can explain a fence within a few seconds.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import confluent_kafka
import pytest
import trio

from raftka.broker.net.control_rpc import ControlRpcClient, ControlRpcServer
from raftka.client.blocking import Admin
from raftka.raft_meta.config.node_config import parse_node_config
from raftka.raft_meta.controller.controller import PROBES_PER_HINT, Controller
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.quorum.quorum import open_quorum_from_config
from raftka.testing.local_cluster import LocalCluster, free_low_port
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.support import free_port, wait_until, wait_until_async

pytestmark = pytest.mark.timeout(120)

SECRET = "liveness-test-secret"
CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"
LONG_SESSION = {"broker.session.timeout.ms": "30000", "broker.heartbeat.interval.ms": "2000"}
# Well before the 30 s session, with slack for a loaded 2-core machine.
DETECTED_WITHIN_S = 10.0


# --- in process: the control connection's end is the hint -------------------------


def _config(tmp_path: Path):
    port = free_low_port(set())
    return parse_node_config({
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.quorum.secret": SECRET,
        "log.dirs": str(tmp_path / "data"),
        # Sessions and quiet periods far longer than the test: only a lost connection
        # can make the controller probe (quiet after 1.5 x 20 s).
        "broker.session.timeout.ms": "60000",
        "broker.heartbeat.interval.ms": "20000",
        "default.replication.factor": "2",
    }, env={})


async def test_lost_control_connection_fences_a_gone_broker_and_spares_a_listening_one(tmp_path: Path) -> None:
    config = _config(tmp_path)
    rpc_host, rpc_port = config.controller_rpc_bind_address()
    paused = socket.socket()  # a broker whose port listens but never accepts, like a SIGSTOPped one
    paused.bind(("127.0.0.1", 0))
    paused.listen(8)
    gone_port = free_port()  # a broker whose process is gone: nothing listens there
    listeners = {2: (("PLAINTEXT", "127.0.0.1", paused.getsockname()[1]),),
                 3: (("PLAINTEXT", "127.0.0.1", gone_port),)}
    clients = {b: ControlRpcClient((rpc_host, rpc_port), SECRET, CLUSTER_ID) for b in listeners}
    try:
        async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
            loader = MetadataLoader(quorum, CLUSTER_ID)
            await nursery.start(loader.run)
            controller = Controller(config, quorum, loader)
            await nursery.start(controller.run)
            await nursery.start(ControlRpcServer(controller, loader, SECRET).serve, rpc_host, rpc_port)
            with trio.fail_after(15):
                await loader.wait_active_controller()

            epochs = {b: await clients[b].call("register_broker", broker_id=b, incarnation_id=f"inc{b}",
                                               listeners=[list(x) for x in listeners[b]], rack=None)
                      for b in listeners}
            for b, epoch in epochs.items():
                reply = await clients[b].call("heartbeat", broker_id=b, broker_epoch=epoch,
                                              metadata_offset=loader.image.offset)
                assert not reply["fenced"]
            topic_id = await controller.create_topic("t", 2, 2)
            assert any(p.leader == 3 for p in loader.image.topics[topic_id].partitions.values())

            # The "paused" broker's connection ends: probed (with follow-ups), found listening, left alone.
            await clients[2].aclose()
            await wait_until_async(lambda: controller.probes["listening"] >= PROBES_PER_HINT, 10, "the probes of broker 2")
            assert not loader.image.brokers[2].fenced
            assert controller.probes["refused"] == 0

            # The gone broker's connection ends: probed, refused, fenced; its leaderships move.
            await clients[3].aclose()
            await wait_until_async(lambda: loader.image.brokers[3].fenced, 10, "broker 3 fenced by the probe")
            assert controller.probes["refused"] >= 1
            parts = loader.image.topics[topic_id].partitions.values()
            assert all(p.leader == 2 and 3 not in p.isr for p in parts)
            assert not loader.image.brokers[2].fenced
            nursery.cancel_scope.cancel()
    finally:
        paused.close()
        for client in clients.values():
            await client.aclose()


def test_probe_switch_defaults_on_and_can_be_turned_off(tmp_path: Path) -> None:
    base = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.quorum.voters": "1@127.0.0.1:9093", "controller.quorum.secret": SECRET,
            "log.dirs": str(tmp_path)}
    assert parse_node_config(base, env={}).broker_liveness_probe_enable is True
    off = parse_node_config({**base, "broker.liveness.probe.enable": "false"}, env={})
    assert off.broker_liveness_probe_enable is False


# --- real clusters: kill -9 and SIGSTOP --------------------------------------------


def _controller_id(cluster: LocalCluster, exclude: set[int] = frozenset()) -> int:
    with Admin(bootstrap_of(cluster, exclude)) as admin:
        return admin.describe_cluster().controller_id


def _live_brokers(cluster: LocalCluster, exclude: set[int]) -> set[int]:
    with Admin(bootstrap_of(cluster, exclude)) as admin:
        return {b.node_id for b in admin.describe_cluster().brokers}


def _events(cluster: LocalCluster, node_id: int, event: str) -> list[dict]:
    path = cluster.nodes[node_id].directory / "server.log"
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if f'"{event}"' in line:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line still being written
    return [e for e in out if e.get("event") == event]


def _produce_acks_all(cluster: LocalCluster, topic: str, partition: int, exclude: set[int]) -> None:
    delivered: list[object] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap_of(cluster, exclude), "acks": "all",
                                        "message.timeout.ms": 30000, "log_level": 0})
    try:
        producer.produce(topic, b"after the crash", partition=partition,
                         on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(40) == 0, "the acks=all produce was not delivered"
        assert delivered == [None], f"the acks=all produce failed: {delivered}"
    finally:
        del producer  # librdkafka stops its threads when the handle goes away


def _partition_led_by(cluster: LocalCluster, topic: str, partitions: int, wanted) -> tuple[int, int]:
    for p in range(partitions):
        leader = partition_info(cluster, topic, p).leader
        if wanted(leader):
            return p, leader
    raise AssertionError(f"no partition of {topic} has a leader that fits")


@pytest.mark.slow
def test_paused_broker_is_not_fenced_and_killed_leader_is_replaced_quickly(tmp_path: Path) -> None:
    with running_cluster(tmp_path, extra=LONG_SESSION) as cluster:
        create_topic(cluster, "probe", 3, 3, {"min.insync.replicas": "2"})
        controller = _controller_id(cluster)
        p, leader = _partition_led_by(cluster, "probe", 3, lambda b: b != controller)
        (bystander,) = set(cluster.nodes) - {controller, leader}

        # SIGSTOP: the kernel still accepts on its port, so the probe sees it listening.
        cluster.pause(bystander)
        try:
            wait_until(lambda: any(e["broker_id"] == bystander and e["result"] == "listening"
                                   for e in _events(cluster, controller, "broker.liveness_probe")),
                       timeout=15, interval=0.2, what=f"the controller probing paused broker {bystander}")
            assert bystander in _live_brokers(cluster, {bystander}), "a paused broker was fenced by the probe"
            assert not [e for e in _events(cluster, controller, "broker.process_gone")]
        finally:
            cluster.resume(bystander)
        wait_partition(cluster, "probe", lambda i: len(i.isr) == 3, partition=p,
                       what="the resumed broker back in the ISR")

        # kill -9 of a leader that is not the controller: its control connection closes at once.
        cluster.kill(leader)
        killed = time.monotonic()
        wait_partition(cluster, "probe", lambda i: i.leader not in (-1, leader), partition=p, exclude={leader},
                       timeout=DETECTED_WITHIN_S, what="a new leader long before the 30 s session expires")
        elapsed = time.monotonic() - killed
        assert elapsed < DETECTED_WITHIN_S
        gone = _events(cluster, controller, "broker.process_gone")
        assert [e["broker_id"] for e in gone] == [leader]
        assert bystander in _live_brokers(cluster, {leader})
        _produce_acks_all(cluster, "probe", p, {leader})


@pytest.mark.slow
def test_killed_controller_that_leads_is_fenced_by_its_successor_quickly(tmp_path: Path) -> None:
    with running_cluster(tmp_path, extra=LONG_SESSION) as cluster:
        create_topic(cluster, "ctlprobe", 3, 3, {"min.insync.replicas": "2"})
        controller = _controller_id(cluster)
        p, _ = _partition_led_by(cluster, "ctlprobe", 3, lambda b: b == controller)

        # The new controller has no connection to watch: it probes, on activation, every
        # broker that has not reached it yet, and finds the old controller's port closed.
        cluster.kill(controller)
        killed = time.monotonic()
        info = wait_partition(cluster, "ctlprobe", lambda i: i.leader not in (-1, controller), partition=p,
                              exclude={controller}, timeout=DETECTED_WITHIN_S,
                              what="leadership moved long before the 30 s session expires")
        assert time.monotonic() - killed < DETECTED_WITHIN_S
        assert controller not in info.isr
        successor = _controller_id(cluster, {controller})
        assert successor not in (-1, controller)
        gone = _events(cluster, successor, "broker.process_gone")
        assert [e["broker_id"] for e in gone] == [controller]
        _produce_acks_all(cluster, "ctlprobe", p, {controller})
