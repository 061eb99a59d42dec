"""Three SDK share consumers (raftka.client.blocking.ShareConsumer, explicit acknowledgement) on
ONE partition of a real 3-node raftka cluster while a producer writes to it, across a kill -9 of
the share coordinator that holds the partition's state (then its restart):

- every record is accepted, and by exactly one consumer, once (acceptance confirmed by
  commit_sync, i.e. ShareAcknowledge answered without error);
- nothing is delivered again once its acceptance was confirmed;
- a fourth member acquires records and never acknowledges them, kept alive: they come back to
  the three with a higher delivery count once the lock (`share.record.lock.duration.ms`, lowered
  here within `group.share.min.record.lock.duration.ms`) times out;
- "poison" records, RELEASEd on every delivery, stop at `share.delivery.count.limit` and are
  archived: the group's start offset passes every record and none is delivered past the limit.

The share coordinator is found as a broker finds it: FindCoordinator key type 2 for the key
"<group>:<topic id, URL-safe base64>:<partition>".
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
from raftka.client.protocol import ApiKey
from raftka.client.records import TopicPartition
from raftka.client.share_records import AcknowledgeType
from raftka.testing.local_cluster import LocalCluster
from tests.compat.wire_client import WireConnection
from tests.integration.cluster_support import bootstrap_of, running_cluster
from tests.integration.test_share_fetch_wire import set_group_configs, topic_id
from tests.support import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC, GROUP = "sq", "sdk-share"
LOCK_MS, LIMIT = 2000, 3
RECORDS = 400
EXTRA = {"group.share.min.record.lock.duration.ms": "1000"}


@dataclass(frozen=True)
class Event:
    at: float
    consumer: str
    kind: str  # ACQ (delivered), OK (acceptance confirmed), REL (released)
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
                    results = consumer.commit_sync()
                    if results.get(tp) is None:
                        for value in accepted:
                            log.add(name, "OK", value)
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
    key = f"{group}:{base64.urlsafe_b64encode(tid.bytes).rstrip(b'=').decode()}:{partition}"
    with WireConnection(bootstrap) as conn:
        response = conn.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})
    (c,) = response.coordinators
    assert c.error_code == 0, c
    return c.node_id


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", extra=EXTRA) as started:
        yield started


def test_three_share_consumers_on_one_partition_through_a_share_coordinator_kill(cluster: LocalCluster) -> None:
    cluster.create_topic(TOPIC, 1, 3)
    with WireConnection(cluster.nodes[1].bootstrap) as conn:
        set_group_configs(conn, GROUP, share_auto_offset_reset="earliest",
                          share_record_lock_duration_ms=str(LOCK_MS), share_delivery_count_limit=str(LIMIT))
        tid = topic_id(conn, TOPIC)
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
        wait_until(lambda: len({e.value for e in log.snapshot() if e.kind == "OK"}) >= RECORDS // 4, timeout=90,
                   what="a quarter of the records accepted")
        coordinator = share_coordinator(cluster.nodes[1].bootstrap, GROUP, tid, 0)
        cluster.kill(coordinator)  # kill -9 of the share coordinator, records in flight
        killed.set()
        wait_until(lambda: len({e.value for e in log.snapshot() if e.kind == "OK"}) >= RECORDS * 3 // 5,
                   timeout=120, what="more records accepted with the share coordinator down")
        cluster.start_node(coordinator, wait=True, timeout=60)

        def settled() -> bool:
            events = log.snapshot()
            accepted = {e.value for e in events if e.kind == "OK"}
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
        assert again and min(x.count for x in again) >= 2, (value, again)
