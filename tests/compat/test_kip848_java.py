"""Apache Kafka's own Java consumer (kafka-clients 4.4, the cached jars) with
`group.protocol=consumer` (KIP-848) against a 3-node raftka cluster: three members share a
6-partition topic while records keep coming; one leaves, the broker coordinating the group is
killed (-9), the member comes back. Every record is consumed exactly once with commits, each
revocation is incremental (a member that stays keeps some of its partitions, no member loses
its partitions to a session timeout), and no partition is ever assigned to two members at once.

The members run in one JVM (tests/compat/java/Kip848Members.java, started from source), each on
its own thread and KafkaConsumer; they commit synchronously after every poll and in
onPartitionsRevoked. The Java consumer speaks ConsumerGroupHeartbeat v1, OffsetCommit v10 and
OffsetFetch v10 (topic ids) to raftka."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster  # noqa: E402
from tests.compat.test_kip848_confluent import SteadyProducer  # noqa: E402
from tests.compat.wire_client import WireConnection  # noqa: E402
from tests.differential.kafka_jars import (  # noqa: E402
    KafkaJars,
    KafkaJarsUnavailable,
    die_with_parent,
    java_binary,
    kafka_jars,
)
from tests.support import wait_until  # noqa: E402

# Heavy (a JVM and a 3-node cluster under load): run by `make compat`, not `make test`, which keeps its bounded part
# (the confluent-kafka and SDK tests of the same features) under its time budget.
pytestmark = pytest.mark.compat_full

TOPIC = "kip848-java"
GROUP = "kip848-java-members"
PARTITIONS = 6
TIMEOUT = 90.0
SOURCE = Path(__file__).resolve().parent / "java" / "Kip848Members.java"
LOG4J = Path(__file__).resolve().parents[1] / "differential" / "log4j2-tools.properties"


@pytest.fixture(scope="module")
def jars() -> KafkaJars:
    try:
        return kafka_jars()
    except KafkaJarsUnavailable as exc:
        reason = str(exc)
    pytest.fail(reason, pytrace=False)  # no Maven, no cache: fail and say so, never skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 3, log_level="INFO", extra_config={
        **FAST_FAILURE_DETECTION,
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
        "group.initial.rebalance.delay.ms": "0",
        # Rebalances take a few heartbeats each: 1 s between them keeps the test short.
        "group.consumer.heartbeat.interval.ms": "1000",
    })
    try:
        c.start_and_wait(90)
        c.create_topic(TOPIC, PARTITIONS, 3)
        yield c
    finally:
        c.stop(timeout=20)


class JavaMembers:
    """The JVM of Kip848Members.java: commands in, JSON events out (read by a thread)."""

    def __init__(self, jars: KafkaJars, bootstrap: str) -> None:
        self.proc = subprocess.Popen(
            [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={LOG4J}", "-cp", jars.classpath, str(SOURCE),
             bootstrap, GROUP, TOPIC],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=die_with_parent)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "stdout", "line": line.rstrip()}
            with self._lock:
                self.events.append(event)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.events.append({"event": "command", "command": command})
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def values(self, member: int | None = None) -> list[int]:
        return [int(v) for e in self.snapshot() if e["event"] == "records"
                and (member is None or e["member"] == member) for _, _, v in e["records"]]

    def owned(self) -> dict[int, set[int]]:
        owned: dict[int, set[int]] = {}
        for e in self.snapshot():
            if e["event"] == "assigned":
                owned.setdefault(e["member"], set()).update(e["partitions"])
            elif e["event"] in ("revoked", "lost"):
                owned.setdefault(e["member"], set()).difference_update(e["partitions"])
            elif e["event"] == "closed":
                owned.pop(e["member"], None)
        return owned

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> str:
        """quit, then wait for the JVM; its stderr."""
        if self.alive():
            try:
                self.send("quit")
                self.proc.wait(120)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def coordinator_of(cluster: LocalCluster, group: str) -> int:
    def found():
        for node in cluster.nodes.values():
            if not node.running:
                continue
            with WireConnection(node.bootstrap) as conn:
                answer = conn.find_coordinator(group)
                if answer.error_code == 0:
                    return answer.node_id
        return None

    return wait_until(found, TIMEOUT, what=f"the coordinator of {group}")


def check_history(events: list[dict]) -> list[str]:
    """What the members' callbacks show that must not happen: a partition assigned to a member
    while another owns it, a member that stays losing all its partitions at once (an eager
    rebalance) or any partition to a session timeout (lost), a poll that failed."""
    problems = []
    owned: dict[int, set[int]] = {}
    stopping: set[int] = set()
    quitting = False
    for e in events:
        kind, member = e["event"], e.get("member")
        if kind == "command" and e["command"] == "quit":
            quitting = True
        elif kind == "command" and e["command"].startswith("stop "):
            stopping.add(int(e["command"].split()[1]))
        elif kind == "command" and e["command"].startswith("start "):
            stopping.discard(int(e["command"].split()[1]))
        elif kind == "assigned":
            for other, theirs in owned.items():
                if other != member and theirs & set(e["partitions"]):
                    problems.append(f"member {member} assigned {e['partitions']} while member {other} owns {theirs}")
            owned.setdefault(member, set()).update(e["partitions"])
        elif kind == "revoked":
            mine = owned.setdefault(member, set())
            if not quitting and member not in stopping and mine and set(e["partitions"]) >= mine:
                problems.append(f"member {member} had all of {sorted(mine)} revoked while staying")
            mine.difference_update(e["partitions"])
        elif kind == "lost":
            problems.append(f"member {member} lost {e['partitions']}")
        elif kind == "closed":
            owned.pop(member, None)
        elif kind == "error" and e.get("where") == "poll":
            problems.append(f"member {member}: {e['error']}")
    return problems


def test_java_consumers_share_a_group_through_leaves_and_a_coordinator_kill(
        jars: KafkaJars, cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap
    producer = SteadyProducer(bootstrap, TOPIC, PARTITIONS)
    members = JavaMembers(jars, bootstrap)
    stderr = ""
    try:
        def consuming(*ids: int) -> None:
            counts = {i: len(members.values(i)) for i in ids}
            wait_until(lambda: not members.alive() or all(len(members.values(i)) > counts[i] for i in ids),
                       TIMEOUT, what=f"members {ids} consuming")
            assert members.alive(), members.snapshot()[-20:]

        def shares(*wanted: int) -> None:
            try:
                wait_until(lambda: sorted(len(p) for p in members.owned().values()) == sorted(wanted),
                           TIMEOUT, what=f"the partitions shared as {wanted}")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: owned {members.owned()}; last events "
                                     f"{[e for e in members.snapshot() if e['event'] != 'records'][-30:]}") from None

        members.send("start 0")
        members.send("start 1")
        shares(3, 3)
        consuming(0, 1)
        members.send("start 2")
        shares(2, 2, 2)
        consuming(0, 1, 2)
        members.send("stop 0")
        shares(3, 3)
        consuming(1, 2)
        victim = coordinator_of(cluster, GROUP)
        cluster.kill(victim)
        consuming(1, 2)  # past the failover: the new coordinator loaded the group
        members.send("start 0")
        shares(2, 2, 2)
        consuming(0, 1, 2)
        total = producer.stop()
        wait_until(lambda: len(members.values()) >= total, TIMEOUT, what=f"{total} records consumed")
        assert sorted(members.values()) == list(range(total)), "a record was lost or consumed twice"
    finally:
        producer.stop()
        stderr = members.close()
    events = members.snapshot()
    assert events[-1]["event"] == "done", (events[-10:], stderr[-3000:])
    assert not check_history(events), check_history(events)
    commits = [e for e in events if e["event"] == "committed"]
    assert len(commits) >= 6, "the members committed"
    # Every commit the members made survived: after a graceful close, the group's committed
    # offsets are the log ends.
    with WireConnection(cluster.nodes[next(n for n, node in cluster.nodes.items() if node.running)].bootstrap) as c:
        found = c.find_coordinator(GROUP)
    with WireConnection(f"{found.host}:{found.port}") as conn:
        committed = [p.committed_offset for p in conn.fetch_offsets(GROUP, TOPIC, range(PARTITIONS)).topics[0].partitions]
    assert committed == [total // PARTITIONS] * PARTITIONS


def test_the_history_check_catches_an_eager_rebalance_and_a_double_owner() -> None:
    """check_history is what proves incremental rebalancing: it must reject these."""
    eager = [{"event": "assigned", "member": 0, "partitions": [0, 1, 2]},
             {"event": "revoked", "member": 0, "partitions": [0, 1, 2]},
             {"event": "assigned", "member": 0, "partitions": [0]}]
    double = [{"event": "assigned", "member": 0, "partitions": [0, 1]},
              {"event": "assigned", "member": 1, "partitions": [1, 2]}]
    leaving = [{"event": "assigned", "member": 0, "partitions": [0, 1]},
               {"event": "command", "command": "stop 0"},
               {"event": "revoked", "member": 0, "partitions": [0, 1]}, {"event": "closed", "member": 0}]
    assert check_history(eager) and check_history(double)
    assert check_history(leaving) == []
