"""Records/s through a share group of 3 consumers next to a consumer group of 3, on the same topic.

Run: .venv/bin/python -m bench.share_group_bench [RECORDS]   (also part of `make bench`)

A 3-node cluster on loopback; one topic of 3 partitions, RF=3, filled first with RECORDS records
of 100 bytes (confluent-kafka, acks=all). Then each group reads the whole topic from the start
with three raftka SDK members (blocking facade, one thread each):

- share group: `ShareConsumer`, implicit acknowledgement (every record ACCEPTed by the next
  poll), `share.auto.offset.reset=earliest`; every member fetches from every partition;
- consumer group: `Consumer` with `group_id`, each member reading the partitions it is assigned.

The rate is RECORDS over the time from the first record any member got to the moment the last
distinct record arrived (joining the group is not counted). "CPU s" is what the whole read cost
the machine: the user + system seconds of this process (the members) and the three brokers
from the members' start to their close, joining included (from /proc: Linux). On a small
machine shared with other work the rate moves with the load; the CPU seconds much less.
Figures as measured, never asserted.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import confluent_kafka

from bench.spark_bench import tree_cpu_seconds
from raftka.client.blocking import Admin, Consumer, ShareConsumer
from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster, free_port_base

TOPIC, PARTITIONS, MEMBERS = "bench-share", 3, 3
RECORDS = 60_000
VALUE_BYTES = 100
TIMEOUT_S = 300.0


@dataclass
class Result:
    group: str
    records: int
    seconds: float
    delivered: int  # deliveries counted, duplicates included
    busy: int  # members that got records
    cpu_s: float  # user + system seconds of the members and the brokers during the read

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


class _Tally:
    def __init__(self, total: int) -> None:
        self.lock = threading.Lock()
        self.seen: set[tuple[int, int]] = set()
        self.delivered = 0
        self.first = self.last = 0.0
        self.total = total
        self.done = threading.Event()
        self.members: set[int] = set()

    def add(self, keys: list[tuple[int, int]]) -> None:
        if not keys:
            return
        now = time.perf_counter()
        with self.lock:
            self.members.add(threading.get_ident())
            if not self.first:
                self.first = now
            self.delivered += len(keys)
            before = len(self.seen)
            self.seen.update(keys)
            if len(self.seen) > before:
                self.last = now
            if len(self.seen) >= self.total:
                self.done.set()


def _share_member(bootstrap: str, group: str, tally: _Tally, stop: threading.Event) -> None:
    with ShareConsumer(bootstrap, group_id=group, max_poll_records=2000) as consumer:
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            tally.add([(r.partition, r.offset) for r in consumer.poll(500)])


def _group_member(bootstrap: str, group: str, tally: _Tally, stop: threading.Event) -> None:
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=500, max_records=2000)
            tally.add([(r.partition, r.offset) for records in polled.values() for r in records])


def _read(name: str, member, bootstrap: str, group: str, records: int) -> Result:
    tally, stop = _Tally(records), threading.Event()
    cpu = tree_cpu_seconds()
    threads = [threading.Thread(target=member, args=(bootstrap, group, tally, stop), daemon=True)
               for _ in range(MEMBERS)]
    for t in threads:
        t.start()
    finished = tally.done.wait(TIMEOUT_S)
    stop.set()
    for t in threads:
        t.join(60)
    if not finished:
        raise RuntimeError(f"{name}: {len(tally.seen)} of {records} records in {TIMEOUT_S:.0f} s")
    return Result(name, records, tally.last - tally.first, tally.delivered, len(tally.members),
                  tree_cpu_seconds() - cpu)


def _fill(bootstrap: str, records: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"x" * VALUE_BYTES
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise RuntimeError("the topic was not filled in 120 s")


def run(records: int = RECORDS) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(f"{tmp}/share", 3, port_base=free_port_base(3), log_level="WARNING",
                               extra_config=dict(FAST_FAILURE_DETECTION))
        try:
            cluster.start_and_wait(90)
            cluster.create_topic(TOPIC, PARTITIONS, 3)
            bootstrap = cluster.bootstrap_servers
            _fill(bootstrap, records)
            with Admin(bootstrap) as admin:
                admin.alter_configs(group="bench-share-group", set_configs={"share.auto.offset.reset": "earliest"})
            return [_read("share group, 3 members", _share_member, bootstrap, "bench-share-group", records),
                    _read("consumer group, 3 members", _group_member, bootstrap, "bench-consumer-group", records)]
        finally:
            cluster.stop()


def format_table(results: list[Result]) -> str:
    lines = ["| group (raftka SDK members) | records | seconds | records/s | deliveries | members that got records "
             "| CPU s |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.group} | {r.records} | {r.seconds:.2f} | {r.records_s:.0f} | {r.delivered} | {r.busy} "
                     f"| {r.cpu_s:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run(int(sys.argv[1]) if len(sys.argv) > 1 else RECORDS)))
