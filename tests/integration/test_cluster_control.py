"""`raftka cluster up` keeps serving when a node dies; `raftka cluster kill|stop|start|restart|status`
act on its nodes, as a user watching a failover would run them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from raftka.client.blocking import Admin
from raftka.testing.cluster_control import ControlError, send
from raftka.testing.local_cluster import free_port_base
from tests.integration.test_cluster_cli import REPO, _env, _node_pids, _raftka
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


class ClusterUp:
    def __init__(self, data_dir: Path, port_base: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "raftka", "cluster", "up", "--nodes", "3", "--data-dir", str(data_dir),
             "--port-base", str(port_base), "--quiet"],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_ready(self) -> None:
        wait_until(lambda: any("raftka cluster ready" in line for line in self.out) or self.proc.poll() is not None,
                   timeout=120, what="cluster up to print its ready line")
        assert self.proc.poll() is None, "".join(self.err)


def _leader(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    with Admin(bootstrap) as admin:
        (desc,) = admin.describe_topics([topic])
    p = desc.partitions[0]
    return p.leader, list(p.isr)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 60000})
    failures = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: failures.append(err) if err else None)
    assert producer.flush(90) == 0
    assert failures == []


def test_a_dead_node_leaves_the_others_serving_and_comes_back(tmp_path):
    data_dir = tmp_path / "data"
    base = free_port_base(3, offsets=(0, 1, 2, 3))
    bootstrap = ",".join(f"127.0.0.1:{base + 100 * i}" for i in range(3))
    up = ClusterUp(data_dir, base)
    try:
        up.wait_ready()
        created = _raftka("topics", "create", "--topic", "failover", "--partitions", "1",
                          "--replication-factor", "3", "--bootstrap-server", bootstrap)
        assert created.returncode == 0, created.stderr
        wait_until(lambda: len(_leader(bootstrap, "failover")[1]) == 3, timeout=60, what="a full ISR")
        _produce(bootstrap, "failover", [f"a{i}".encode() for i in range(50)])
        leader, _ = _leader(bootstrap, "failover")

        # A crash the launcher did not cause: kill -9 from outside.
        (pid,) = _node_pids(data_dir / f"node-{leader}")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: any(f"node {leader} exited (signal SIGKILL)" in line for line in up.err),
                   timeout=30, what="cluster up to report the dead node")
        report = next(line for line in up.err if f"node {leader} exited" in line)
        assert "keep serving" in report and f"raftka cluster start --node {leader}" in report
        assert up.proc.poll() is None  # the others are still up
        survivors = ",".join(f"127.0.0.1:{base + 100 * (i - 1)}" for i in (1, 2, 3) if i != leader)
        _produce(survivors, "failover", [f"b{i}".encode() for i in range(50)])  # the new leader takes acks=all
        new_leader, _ = _leader(survivors, "failover")
        assert new_leader not in (leader, -1)

        status = _raftka("cluster", "status", "--data-dir", str(data_dir))
        assert status.returncode == 0, status.stderr
        assert f"node {leader}: down (signal SIGKILL)" in status.stdout

        started = _raftka("cluster", "start", "--node", str(leader), "--data-dir", str(data_dir), timeout=120)
        assert started.returncode == 0, started.stderr
        assert "serving again" in started.stdout
        wait_until(lambda: len(_leader(bootstrap, "failover")[1]) == 3, timeout=60,
                   what="the restarted node back in the ISR")

        # The commands' own kill and restart, and their errors.
        other = next(i for i in (1, 2, 3) if i != leader)
        killed = _raftka("cluster", "kill", "--node", str(other), "--data-dir", str(data_dir))
        assert killed.returncode == 0 and f"node {other} killed" in killed.stdout, killed.stderr
        again = _raftka("cluster", "kill", "--node", str(other), "--data-dir", str(data_dir))
        assert again.returncode == 1 and "not running" in again.stderr
        restarted = _raftka("cluster", "restart", "--node", str(other), "--data-dir", str(data_dir), timeout=120)
        assert restarted.returncode == 0, restarted.stderr
        missing = _raftka("cluster", "stop", "--node", "9", "--data-dir", str(data_dir))
        assert missing.returncode == 1 and "no node 9" in missing.stderr

        # Nothing acknowledged was lost, in order.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
        consumer.assign([TopicPartition("failover", 0, 0)])
        got = []
        wait_until(lambda: _drain(consumer, got) >= 100, timeout=60, what="100 records read back")
        consumer.close()
        assert got == [f"a{i}".encode() for i in range(50)] + [f"b{i}".encode() for i in range(50)]

        up.proc.send_signal(signal.SIGINT)
        assert up.proc.wait(timeout=90) == 0
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
    wait_until(lambda: not _node_pids(data_dir), timeout=30, what="every node process to exit")
    with pytest.raises(ControlError, match="no running `raftka cluster up`"):
        send(data_dir, "status")


def _drain(consumer: Consumer, into: list[bytes]) -> int:
    msg = consumer.poll(0.5)
    if msg is not None and not msg.error():
        into.append(msg.value())
    return len(into)


def test_no_cluster_up_is_a_one_line_error(tmp_path):
    result = _raftka("cluster", "kill", "--node", "1", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip().startswith("raftka cluster kill: no running `raftka cluster up` in")
    assert "Traceback" not in result.stderr
