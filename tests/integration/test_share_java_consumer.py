"""Apache Kafka's own share consumer (KafkaShareConsumer, kafka-clients 4.4) against a real
3-node raftka cluster: consumers of one share group take the records of a 3-partition topic
together while it is produced to, each record accepted exactly once across them.

The consumers are tests/integration/java/ShareConsumerDriver.java, compiled once against the
cached Kafka 4.4 jars (tests/differential/kafka_jars.py); each prints the records it acquires
and the outcome of its acknowledgements. Along the way: a released record comes back with
delivery count 2; a consumer that hangs on its records and is killed -9 has them delivered to
the others; the leader of partition 0 is killed -9 and what was accepted stays accepted.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raftka.testing.local_cluster import LocalCluster
from tests.compat.wire_client import WireConnection
from tests.differential.kafka_jars import (
    KafkaJars,
    KafkaJarsUnavailable,
    die_with_parent,
    java_binary,
    kafka_jars,
)
from tests.integration.cluster_support import bootstrap_of, partition_info, running_cluster
from tests.integration.test_share_fetch_wire import set_group_configs
from tests.support import wait_until

# Heavy (a JVM and a 3-node cluster through two kills): run by `make compat`, not `make test`, which keeps its bounded part
# (the confluent-kafka and SDK tests of the same features) under its time budget.
pytestmark = pytest.mark.compat_full

confluent_kafka = pytest.importorskip("confluent_kafka")

HERE = Path(__file__).resolve().parent
TOPIC, GROUP, PARTITIONS = "jq", "java-share", 3
LOCK_MS = 5000
EXTRA = {"group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture(scope="module")
def jars() -> KafkaJars:
    try:
        return kafka_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Kafka 4.4's jars: {exc}")


@pytest.fixture(scope="module")
def driver_classes(jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("share-java")
    javac = str(Path(java_binary()).with_name("javac"))
    subprocess.run([javac, "-cp", jars.classpath, "-d", str(out), str(HERE / "java" / "ShareConsumerDriver.java")],
                   check=True, timeout=180)
    return out


@dataclass
class Event:
    at: float
    consumer: str
    kind: str  # ACQ, OK, REL, FAIL
    value: str
    count: int = 0


@dataclass
class JavaShareConsumer:
    name: str
    process: subprocess.Popen
    events: list[Event]
    lock: threading.Lock
    lines: list[str] = field(default_factory=list)

    def pump(self) -> None:
        assert self.process.stdout is not None
        offsets: dict[tuple[int, int], str] = {}
        for raw in self.process.stdout:
            line = raw.rstrip("\n")
            self.lines.append(line)
            parts = line.split(" ", 4)
            with self.lock:
                if parts[0] == "ACQ":
                    offsets[(int(parts[1]), int(parts[2]))] = parts[4]
                    self.events.append(Event(time.monotonic(), self.name, "ACQ", parts[4], int(parts[3])))
                elif parts[0] in ("OK", "REL"):
                    self.events.append(Event(time.monotonic(), self.name, parts[0], parts[3]))
                elif parts[0] == "FAIL":
                    value = offsets.get((int(parts[1]), int(parts[2])), "?")
                    self.events.append(Event(time.monotonic(), self.name, "FAIL", value))

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("stop\n")
                self.process.stdin.flush()
                self.process.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


class Consumers:
    def __init__(self, jars: KafkaJars, classes: Path, bootstrap: str) -> None:
        self.jars, self.classes, self.bootstrap = jars, classes, bootstrap
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.started: list[JavaShareConsumer] = []

    def start(self, name: str, mode: str) -> JavaShareConsumer:
        command = [java_binary(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dlog4j2.configurationFile={HERE.parent / 'differential' / 'log4j2-tools.properties'}",
                   "-cp", f"{self.classes}:{self.jars.classpath}", "ShareConsumerDriver",
                   self.bootstrap, GROUP, TOPIC, mode]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, preexec_fn=die_with_parent)
        consumer = JavaShareConsumer(name, process, self.events, self.lock)
        threading.Thread(target=consumer.pump, daemon=True).start()
        self.started.append(consumer)
        return consumer

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def stop_all(self) -> None:
        for consumer in self.started:
            consumer.stop()


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", extra=EXTRA) as started:
        yield started


def test_java_share_consumers_accept_every_record_once(cluster: LocalCluster, jars: KafkaJars,
                                                        driver_classes: Path) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    with WireConnection(cluster.nodes[1].bootstrap) as conn:
        set_group_configs(conn, GROUP, share_auto_offset_reset="earliest",
                          share_record_lock_duration_ms=str(LOCK_MS))
    values = [("release-%d" if i % 10 == 3 else "v-%d") % i for i in range(300)]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap_of(cluster), "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "message.timeout.ms": 60000})

    def produce(chunk: list[str]) -> None:
        for i, value in enumerate(chunk):
            producer.produce(TOPIC, value.encode(), partition=i % PARTITIONS)
        assert producer.flush(60) == 0

    consumers = Consumers(jars, driver_classes, bootstrap_of(cluster))
    try:
        hanging = consumers.start("hanging", "hold")
        produce(values[:60])
        held = wait_until(lambda: {e.value for e in consumers.snapshot() if e.consumer == "hanging"}, timeout=90,
                          what="the hanging consumer to acquire records")
        a = consumers.start("a", "accept")
        consumers.start("b", "accept")
        wait_until(lambda: any(e.consumer == "a" for e in consumers.snapshot()), timeout=90,
                   what="consumer a to get records")
        hanging.process.kill()  # kill -9: its locked records go to the others
        hanging.process.wait()
        produce(values[60:150])
        wait_until(lambda: len({e.value for e in consumers.snapshot() if e.kind == "OK"}) >= 100, timeout=90,
                   what="100 records accepted")
        leader = partition_info(cluster, TOPIC, 0).leader
        cluster.kill(leader)  # kill -9 of partition 0's leader, records in flight
        consumers.start("c", "accept")
        produce(values[150:])

        def all_accepted() -> bool:
            return {e.value for e in consumers.snapshot() if e.kind == "OK"} >= set(values)

        wait_until(all_accepted, timeout=180, interval=0.5,
                   what=f"every record accepted (a's last lines: {a.lines[-5:]})")
    finally:
        consumers.stop_all()
        producer.purge()
    events = consumers.snapshot()
    accepted: dict[str, list[Event]] = {}
    for e in events:
        if e.kind == "OK":
            accepted.setdefault(e.value, []).append(e)
    twice = {v: [x.consumer for x in es] for v, es in accepted.items() if len(es) > 1}
    assert not twice, f"accepted more than once: {twice}"
    # Nothing is delivered again once its acceptance was confirmed.
    for e in events:
        if e.kind == "ACQ" and e.value in accepted:
            assert e.at <= accepted[e.value][0].at, f"{e.value} delivered after it was accepted: {e}"
    # Released on a first delivery to an accepting consumer; every one accepted on a later one.
    for value in values:
        if value.startswith("release"):
            mine = [e for e in events if e.value == value]
            first_tries = [e for e in mine if e.kind == "ACQ" and e.count == 1 and e.consumer != "hanging"]
            if first_tries and not any(e.kind == "FAIL" for e in mine):
                assert any(e.kind == "REL" for e in mine), mine
            accepted_after = [e for e in mine if e.kind == "ACQ" and e.count >= 2]
            assert accepted_after, mine
    released = {e.value for e in events if e.kind == "REL"}
    assert released, "no record was released"
    assert {e.value for e in events if e.kind == "ACQ" and e.count == 2} & released
    # The hanging consumer's records came to the others, delivered a second time.
    for value in held:
        again = [e for e in events if e.value == value and e.kind == "ACQ" and e.consumer != "hanging"]
        assert again and again[0].count >= 2, (value, again)
