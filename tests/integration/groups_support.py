"""Helpers for the consumer-group tests: librdkafka group members in threads or processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from confluent_kafka import Consumer, Producer

from tests.integration.sdk_broker import raftka_env

# Short group timeouts for tests; the broker must allow them (group.min.session.timeout.ms).
GROUP_EXTRA = {
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
SESSION_TIMEOUT_MS = 4000


# librdkafka refuses these with group.protocol=consumer: the coordinator decides them (KIP-848).
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
              "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
              "partition.assignment.strategy": "range", **extra}
    if config.get("group.protocol") == "consumer":
        for key in CLASSIC_ONLY:
            config.pop(key)
    return config


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    """Values str(i) for i in [start, start+count), round-robin over the partitions, acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    assert producer.flush(60) == 0, "messages left undelivered"


class ThreadMember:
    """A librdkafka group member polling in its own thread; commits what it consumed after each poll.

    `assignment` follows the rebalance callbacks incrementally, so it is right for eager
    strategies (revoke all, assign all) and cooperative-sticky (revoke/assign only what
    moves) alike; `assigned_calls` / `revoked_calls` record each callback's partitions."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config) -> None:
        self.consumer = Consumer(consumer_config(bootstrap, group, **config))
        self.values: list[int] = []
        self.assignment: set[int] = set()
        self.assigned_calls: list[set[int]] = []
        self.revoked_calls: list[set[int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer, partitions) -> None:
        with self._lock:
            self.assigned_calls.append({p.partition for p in partitions})
            self.assignment = self.assignment | {p.partition for p in partitions}

    def _revoked(self, consumer, partitions) -> None:
        with self._lock:
            self.revoked_calls.append({p.partition for p in partitions})
            self.assignment = self.assignment - {p.partition for p in partitions}

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = self.consumer.consume(100, 0.1)
                good = [m for m in messages if m.error() is None]
                with self._lock:
                    self.values += [int(m.value()) for m in good]
                if good:
                    try:
                        self.consumer.commit(asynchronous=False)
                    except Exception as exc:  # a rebalance can refuse a commit; later ones retry
                        self.errors.append(str(exc))
        finally:
            self.consumer.close()  # leaves the group

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "consumer thread did not stop"


MEMBER_SCRIPT = r"""
import json, sys
from confluent_kafka import Consumer
config = json.loads(sys.argv[1])
consumer = Consumer(config)
consumer.subscribe([sys.argv[2]], on_assign=lambda c, ps: print(
    "assigned", json.dumps([p.partition for p in ps]), flush=True))
while True:
    consumer.poll(0.1)
"""


def start_process_member(bootstrap: str, group: str, topic: str, log_path: Path) -> subprocess.Popen:
    """A librdkafka member in its own process (to be SIGKILLed); prints 'assigned [..]' lines."""
    return subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, json.dumps(consumer_config(bootstrap, group)), topic],
        stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, env=raftka_env())
