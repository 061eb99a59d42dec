"""KafkaJS (Node's most used Kafka client) against a real 3-node raftka cluster.

KafkaJS is installed with npm into a cache dir (RAFTKA_TEST_CACHE, default
~/.cache/raftka-test) the first time, from tests/compat/kafkajs/package.json (pinned). Each
scenario is one `node check.js ...` run that stops by itself; see that file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster
from tests.integration.cluster_support import bootstrap_of, create_topic, partition_info
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent / "kafkajs"
NODE = shutil.which("node")
NPM = shutil.which("npm")


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    """A directory with check.js and node_modules/kafkajs (installed once per package.json)."""
    assert NODE and NPM, "node and npm are needed for the KafkaJS tests (this machine has them)"
    spec = (HERE / "package.json").read_bytes()
    cache = Path(os.environ.get("RAFTKA_TEST_CACHE", Path.home() / ".cache" / "raftka-test"))
    target = cache / f"kafkajs-{hashlib.sha256(spec).hexdigest()[:12]}"
    if not (target / "node_modules" / "kafkajs" / "package.json").exists():
        target.mkdir(parents=True, exist_ok=True)
        (target / "package.json").write_bytes(spec)
        subprocess.run([NPM, "install", "--no-audit", "--no-fund", "--silent"], cwd=target, check=True,
                       timeout=300, capture_output=True)
    shutil.copy(HERE / "check.js", target / "check.js")
    return target


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("kafkajs"), 3, extra_config=FAST_FAILURE_DETECTION, log_level="INFO")
    try:
        c.start_and_wait(90)
        yield c
    finally:
        c.stop(timeout=20)


class Run:
    """One `node check.js SCENARIO ...` run, its JSON events collected as they come."""

    def __init__(self, kafkajs: Path, scenario: str, bootstrap: str, *args: object) -> None:
        self.proc = subprocess.Popen([NODE, str(kafkajs / "check.js"), scenario, bootstrap, *map(str, args)],
                                     cwd=kafkajs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.stderr = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"event": "stdout", "line": line})

    def wait_event(self, name: str, timeout: float = 120) -> dict:
        return wait_until(lambda: next((e for e in self.events if e["event"] == name), None)
                          or (None if self.proc.poll() is None else self._failed()),
                          timeout=timeout, interval=0.1, what=f"KafkaJS event {name!r}")

    def done(self, timeout: float = 180) -> dict:
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(5)
        self.stderr = self.proc.stderr.read()
        last = self.events[-1] if self.events else {}
        assert self.proc.returncode == 0 and last.get("event") == "done", (self.events, self.stderr)
        return last

    def _failed(self):
        raise AssertionError(f"KafkaJS exited {self.proc.returncode}: {self.events} {self.proc.stderr.read()}")


def test_admin_create_describe_delete(kafkajs, cluster):
    result = Run(kafkajs, "admin", bootstrap_of(cluster), "kjs-admin").done()
    assert result["created"] is True and result["again"] is False  # false: it already existed
    assert result["listed"] and result["partitions"] == 3
    assert result["replicas"] == 3 and result["isr"] == 3
    assert sorted(result["offsets"]) == [[0, "0"], [1, "0"], [2, "0"]]
    assert result["brokers"] == 3 and result["controller"] in (1, 2, 3)
    assert result["configEntries"] > 0
    assert result["gone"] is True


def test_group_of_three_reads_everything_once(kafkajs, cluster):
    topic = "kjs-group"
    create_topic(cluster, topic, partitions=6, rf=3)
    Run(kafkajs, "produce", bootstrap_of(cluster), topic, 600).done()
    result = Run(kafkajs, "group", bootstrap_of(cluster), topic, "kjs-group-1", 3, 600).done()
    assert result["distinct"] == 600
    assert result["duplicates"] == 0
    assert result["joins"] >= 3  # each member joined at least once; later joins rebalanced the others


def test_idempotent_producer_across_a_leader_kill(kafkajs, cluster):
    topic = "kjs-idempotent"
    create_topic(cluster, topic, partitions=1, rf=3)
    leader = partition_info(cluster, topic).leader
    run = Run(kafkajs, "produce", bootstrap_of(cluster), topic, 400, 100)
    run.wait_event("sent")
    cluster.kill(leader)
    try:
        assert run.done()["sent"] == 400
    finally:
        cluster.start_node(leader, wait=True, timeout=90)
    read = Run(kafkajs, "consume", bootstrap_of(cluster), topic, 400).done()
    values = [v for _, _, v in sorted(read["records"])]
    assert values == [f"v{i}" for i in range(400)]  # every send once, in order


def test_reassignment_moves_a_partition_and_keeps_every_record(kafkajs, cluster):
    """alterPartitionReassignments / listPartitionReassignments (KIP-455) under KafkaJS, with
    records written before the move read back afterwards."""
    topic = "kjs-reassign"
    create_topic(cluster, topic, partitions=1, rf=1, configs={"min.insync.replicas": "1"})
    Run(kafkajs, "produce", bootstrap_of(cluster), topic, 200).done()
    (source,) = partition_info(cluster, topic).replicas
    target = sorted(n for n in cluster.nodes if n != source)
    result = Run(kafkajs, "reassign", bootstrap_of(cluster), topic, ",".join(map(str, target))).done()
    assert result["refused"] == "INVALID_REPLICA_ASSIGNMENT"
    assert result["replicas"] == target and sorted(result["isr"]) == target and result["leader"] in target
    assert result["listedAfter"] == []
    for entry in result["listedDuring"]:  # the move may already be over when KafkaJS lists it
        assert entry["name"] == topic
        [part] = entry["partitions"]
        assert part["replicas"] == [*target, source] and part["addingReplicas"] == target
        assert part["removingReplicas"] == [source]
    records = Run(kafkajs, "consume", bootstrap_of(cluster), topic, 200).done()["records"]
    assert sorted(v for _, _, v in records) == sorted(f"v{i}" for i in range(200))
