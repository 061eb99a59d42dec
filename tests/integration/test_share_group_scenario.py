"""Three SDK share consumers (raftka.client.blocking.ShareConsumer, explicit acknowledgement) on
ONE partition of a real 3-node raftka cluster while a producer writes to it, across a kill -9 of
the share coordinator that holds the partition's state (then its restart):

- every record is accepted, and by exactly one consumer, once (acceptance confirmed by
  commit_sync, i.e. ShareAcknowledge answered without error; an ACCEPT left unanswered by the
  dying broker may have been applied or not, and is only known settled by the group's start
  offset passing it);
- nothing is delivered again once its acceptance was confirmed;
- a fourth member acquires records and never acknowledges them, kept alive: they come back to
  the three with a higher delivery count once the lock (`share.record.lock.duration.ms`, lowered
  here within `group.share.min.record.lock.duration.ms`) times out (checked before the kill: a
  new leader redelivers a record acquired at the kill without counting that attempt, as Kafka);
- "poison" records, RELEASEd on every delivery, stop at `share.delivery.count.limit` and are
  archived: the group's start offset passes every record and none is delivered past the limit.

The share coordinator is found as a broker finds it: FindCoordinator key type 2 for the key
"<group>:<topic id, URL-safe base64>:<partition>". The partition's leader is placed on that
broker too, so the kill also moves the partition: its new leader must read the share state back
from `__share_group_state` through the new coordinator, and what was accepted stays accepted.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from raftka.client.admin import AsyncAdmin
from raftka.client.blocking import ShareConsumer
from raftka.client.errors import KafkaError
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.records import TopicPartition
from raftka.client.share_records import AcknowledgeType
from raftka.testing.local_cluster import LocalCluster
from tests.compat.wire_client import WireConnection
from tests.integration.cluster_support import (
    bootstrap_of,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.integration.test_share_fetch_wire import set_group_configs, topic_id
from tests.support import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC, GROUP = "sq", "sdk-share"
LOCK_MS, LIMIT = 2000, 3
RECORDS = 400
# One `__share_group_state` partition: one share coordinator for every key, known before the
# topic (and so its id) exists, which lets the test place the topic's leader on it.
EXTRA = {"group.share.min.record.lock.duration.ms": "1000", "share.coordinator.state.topic.num.partitions": "1"}


@dataclass(frozen=True)
class Event:
    at: float
    consumer: str
    kind: str  # ACQ (delivered), OK (acceptance confirmed), UNKNOWN (ACCEPT sent, no answer), REL (released)
    value: str
    count: int = 0


class Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.errors: list[str] = []

    def add(self, consumer: str, kind: str, value: str, count: int = 0) -> None:
        with self.lock:
            self.events.append(Event(time.monotonic(), consumer, kind, value, count))

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)


def worker(name: str, bootstrap: str, log: Log, stop: threading.Event) -> None:
    """ACCEPT every record but the poison ones, which are RELEASEd; confirm with commit_sync."""
    tp = TopicPartition(TOPIC, 0)
    with ShareConsumer(bootstrap, group_id=GROUP, acknowledgement_mode="explicit", fetch_max_wait_ms=200,
                       request_timeout_ms=10000) as consumer:
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            try:
                records = consumer.poll(300)
                accepted = []
                for r in records:
                    value = r.value.decode()
                    log.add(name, "ACQ", value, r.delivery_count)
                    if value.startswith("poison"):
                        consumer.acknowledge(r, AcknowledgeType.RELEASE)
                        log.add(name, "REL", value, r.delivery_count)
                    else:
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                        accepted.append(value)
                if records:
                    try:
                        confirmed = consumer.commit_sync().get(tp) is None
                    except KafkaError:  # sent, perhaps applied, no answer: the outcome is unknown
                        confirmed = False
                    for value in accepted:
                        log.add(name, "OK" if confirmed else "UNKNOWN", value)
            except KafkaError as exc:  # a broker going away: the records come back to the group
                with log.lock:
                    log.errors.append(f"{name}: {exc!r}")


def hoarder(bootstrap: str, log: Log, stop: threading.Event, got: threading.Event) -> None:
    """Acquire records once and never acknowledge them; stay a live member until told."""
    with ShareConsumer(bootstrap, group_id=GROUP, acknowledgement_mode="explicit", fetch_max_wait_ms=200) as consumer:
        consumer.subscribe([TOPIC])
        while not stop.is_set() and not got.is_set():
            for r in consumer.poll(300):
                log.add("hoarder", "ACQ", r.value.decode(), r.delivery_count)
                got.set()
        stop.wait()


async def share_start_offset(bootstrap: str) -> int:
    async with AsyncAdmin(bootstrap) as admin:
        (offset,) = await admin.describe_share_group_offsets(GROUP, {TOPIC: [0]})
    return offset.start_offset


def share_coordinator(bootstrap: str, group: str, tid: uuid.UUID, partition: int) -> int:
    """The node FindCoordinator (key type 2) names, once it names one (the first lookup creates
    `__share_group_state`, whose leader takes a moment)."""
    key = f"{group}:{base64.urlsafe_b64encode(tid.bytes).rstrip(b'=').decode()}:{partition}"

    def find() -> int | None:
        with WireConnection(bootstrap) as conn:
            response = conn.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})
        (c,) = response.coordinators
        assert c.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE), c
        return c.node_id if c.error_code == 0 else None

    return wait_until(find, timeout=30, interval=0.2, what=f"the share coordinator of {key}")


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", extra=EXTRA) as started:
        yield started


def create_topic_led_by(cluster: LocalCluster, leader: int) -> None:
    replicas = [leader, *sorted(n for n in cluster.nodes if n != leader)]
    with WireConnection(cluster.nodes[1].bootstrap) as conn:
        response = conn.request(ApiKey.CREATE_TOPICS, 5, {"topics": [{
            "name": TOPIC, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": 0, "broker_ids": replicas}], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
    assert response.topics[0].error_code == 0, response
    wait_partition(cluster, TOPIC, lambda p: p.leader == leader and len(p.isr) == 3,
                   what=f"{TOPIC} led by node {leader} with a full ISR")


def test_three_share_consumers_on_one_partition_through_a_share_coordinator_kill(cluster: LocalCluster) -> None:
    first = cluster.nodes[1].bootstrap
    coordinator = share_coordinator(first, GROUP, uuid.uuid4(), 0)  # creates __share_group_state
    create_topic_led_by(cluster, coordinator)
    with WireConnection(first) as conn:
        set_group_configs(conn, GROUP, share_auto_offset_reset="earliest",
                          share_record_lock_duration_ms=str(LOCK_MS), share_delivery_count_limit=str(LIMIT))
        tid = topic_id(conn, TOPIC)
    assert share_coordinator(first, GROUP, tid, 0) == coordinator
    values = [("poison-%d" if i % 50 == 7 else "v-%d") % i for i in range(RECORDS)]
    poison = {v for v in values if v.startswith("poison")}
    log, stop, hoarded, killed = Log(), threading.Event(), threading.Event(), threading.Event()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap_of(cluster), "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 90000})
    produced: list[str] = []

    def produce() -> None:  # the load: chunks of 10, each flushed; the second half after the kill
        for i in range(0, RECORDS, 10):
            if i == RECORDS // 2:
                killed.wait(120)
            for value in values[i:i + 10]:
                producer.produce(TOPIC, value.encode(), partition=0)
            if producer.flush(90) == 0:
                produced.extend(values[i:i + 10])

    bootstrap = bootstrap_of(cluster)
    threads = [threading.Thread(target=hoarder, args=(bootstrap, log, stop, hoarded), daemon=True)]
    threads[0].start()
    producer_thread = threading.Thread(target=produce, daemon=True)
    producer_thread.start()
    try:
        wait_until(hoarded.is_set, timeout=60, what="the hoarding member to acquire records")
        threads += [threading.Thread(target=worker, args=(f"c{i}", bootstrap, log, stop), daemon=True)
                    for i in range(3)]
        for t in threads[1:]:
            t.start()

        def hoard_returned() -> bool:  # before the kill: a new leader would redeliver without counting
            events = log.snapshot()
            held = {e.value for e in events if e.consumer == "hoarder"}
            back = {e.value for e in events if e.kind == "ACQ" and e.consumer != "hoarder" and e.count >= 2}
            return held <= back

        wait_until(hoard_returned, timeout=60, interval=0.2,
                   what="the hoarded records delivered again after their locks expired")
        wait_until(lambda: len({e.value for e in log.snapshot() if e.kind == "OK"}) >= RECORDS // 4, timeout=90,
                   what="a quarter of the records accepted")
        assert share_coordinator(first, GROUP, tid, 0) == coordinator == partition_info(cluster, TOPIC).leader
        cluster.kill(coordinator)  # kill -9 of the share coordinator and partition leader, records in flight
        killed.set()
        wait_until(lambda: len({e.value for e in log.snapshot() if e.kind == "OK"}) >= RECORDS * 3 // 5,
                   timeout=120, what="more records accepted with the share coordinator down")
        cluster.start_node(coordinator, wait=True, timeout=60)

        def settled() -> bool:
            events = log.snapshot()
            # An ACCEPT the dying leader applied but never answered is not delivered again:
            # the group's start offset passing every record (below) shows it settled.
            accepted = {e.value for e in events if e.kind in ("OK", "UNKNOWN")}
            at_limit = {e.value for e in events if e.kind == "REL" and e.count == LIMIT}
            return accepted >= set(values) - poison and at_limit >= poison

        wait_until(settled, timeout=180, interval=0.5, what="every record accepted and every poison at the limit")
        producer_thread.join(60)
        assert produced == values

        def archived() -> bool:  # every record accepted or archived: the group starts past them
            return trio.run(share_start_offset, bootstrap_of(cluster)) >= RECORDS

        wait_until(archived, timeout=60, interval=0.5, what="the group's start offset past every record")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        producer.purge()
    assert not any(t.is_alive() for t in threads), "a consumer did not stop"
    events = log.snapshot()
    accepted: dict[str, list[Event]] = {}
    for e in events:
        if e.kind == "OK":
            accepted.setdefault(e.value, []).append(e)
    twice = {v: [x.consumer for x in es] for v, es in accepted.items() if len(es) > 1}
    assert not twice, f"accepted more than once: {twice}"
    assert not set(accepted) & poison
    for e in events:
        if e.kind == "ACQ" and e.value in accepted:
            assert e.at <= accepted[e.value][0].at, f"{e.value} delivered after its acceptance: {e}"
    for value in poison:
        counts = sorted(e.count for e in events if e.kind == "ACQ" and e.value == value)
        assert counts and max(counts) == LIMIT, (value, counts)
    held = {e.value for e in events if e.consumer == "hoarder"}
    for value in held:
        again = [e for e in events if e.value == value and e.kind == "ACQ" and e.consumer != "hoarder"]
        assert again and again[0].count >= 2, (value, again)
