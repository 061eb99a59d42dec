"""Replication throttles (KIP-73) on a real 3-node cluster, set by `raftka reassign execute
--throttle` as kafka-reassign-partitions sets them: the new replica's copy is held to the
configured rate (measured as the bytes of its log on disk, against the rate with generous
slack), while the in-sync replica of the same throttled partition keeps up with the leader;
once the rates are deleted the copy finishes, and `reassign verify` clears the throttles."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import confluent_kafka
import pytest

from raftka.broker.replication.replica_fetcher import PARTITION_MAX_BYTES
from raftka.client.blocking import Admin
from tests.integration.cluster_support import (
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.integration.sdk_broker import RAFTKA, raftka_env
from tests.support import wait_until

pytestmark = pytest.mark.slow

TOPIC = "big"
RATE = 30_000  # bytes/s, leader and follower
WINDOWS_S = 11  # replication.quota.window.num x replication.quota.window.size.seconds (the defaults)
# One fetch is checked before it is counted: a partition's max bytes plus the batch that
# crosses it, and room for headers.
FETCH_BYTES = PARTITION_MAX_BYTES + 256 * 1024
# The meter forgets a sample WINDOWS_S after its last byte, so one fetch per WINDOWS_S passes
# whatever the rate (in Kafka too: a rate below replica.fetch.max.bytes / 11 s acts as that).
EFFECTIVE_RATE = max(RATE, FETCH_BYTES / WINDOWS_S)
# Beyond EFFECTIVE_RATE x elapsed: what the meter may owe from before (it may have counted
# less than RATE x its span) and the fetch in flight.
SLACK = RATE * WINDOWS_S + FETCH_BYTES
INITIAL = 4 * 1024 * 1024  # copied to the new replica under the throttle
EXTRA = 3 * 1024 * 1024  # produced acks=all meanwhile: the in-sync replica must get all of it


def _raftka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], capture_output=True, text=True, env=raftka_env(), timeout=120)


def _log_bytes(cluster, node: int) -> int:
    """The bytes of the node's log of big-0 (segments are written unbuffered)."""
    total = 0
    for segment in (Path(cluster.nodes[node].directory) / "data" / f"{TOPIC}-0").glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _produce(bootstrap: str, nbytes: int, tag: bytes) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "batch.size": 65536, "log_level": 0})
    value = tag * (1000 // len(tag))
    for _ in range(nbytes // len(value)):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def _within_rate(samples: list[tuple[float, int]]) -> None:
    """Every interval between two samples moved at most EFFECTIVE_RATE x its length + SLACK bytes."""
    for i, (t0, b0) in enumerate(samples):
        for t1, b1 in samples[i + 1:]:
            assert b1 - b0 <= EFFECTIVE_RATE * (t1 - t0) + SLACK, (
                f"the throttled replica received {b1 - b0} bytes in {t1 - t0:.2f} s; the throttle allows "
                f"{EFFECTIVE_RATE:.0f} B/s + {SLACK} bytes")


def test_reassign_throttle_limits_the_copy_not_the_in_sync_replica(tmp_path):
    with running_cluster(tmp_path / "c", nodes=3) as cluster:
        create_topic(cluster, TOPIC, 1, 2, {"min.insync.replicas": "2"})
        info = partition_info(cluster, TOPIC)
        leader = info.leader
        (in_sync,) = set(info.replicas) - {leader}
        (new,) = set(cluster.nodes) - set(info.replicas)
        _produce(cluster.bootstrap_servers, INITIAL, b"i")
        total = wait_until(lambda: (lambda n: n if n == _log_bytes(cluster, in_sync) else None)(
            _log_bytes(cluster, leader)), timeout=60, interval=0.1, what="both replicas to hold the data")
        assert total >= INITIAL

        plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0,
                                              "replicas": [*info.replicas, new]}]}
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        plan_args = ["--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file",
                     str(tmp_path / "plan.json")]
        started = time.monotonic()
        executed = _raftka("reassign", "execute", *plan_args, "--throttle", str(RATE))
        assert executed.returncode == 0, executed.stderr
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in executed.stdout
        assert not executed.stderr
        with Admin(cluster.bootstrap_servers) as admin:
            configs = admin.describe_configs(TOPIC)
            assert configs["leader.replication.throttled.replicas"].value == ",".join(
                sorted(f"0:{b}" for b in info.replicas))
            assert configs["follower.replication.throttled.replicas"].value == f"0:{new}"
            for node in cluster.nodes:
                assert admin.describe_configs(broker_id=node)["leader.replication.throttled.rate"].value == str(RATE)

        # The copy to the new replica: held to the rate, measured on its log.
        samples = [(started, 0)]
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            samples.append((time.monotonic(), _log_bytes(cluster, new)))
            time.sleep(0.2)
        _within_rate(samples)
        assert samples[-1][1] < total, "the throttled copy finished at once"

        # The in-sync replica of the same throttled partition is not held back (Kafka throttles
        # only replicas out of the ISR): it receives far more than the rate allows.
        before = _log_bytes(cluster, in_sync)
        produced_at = time.monotonic()
        _produce(cluster.bootstrap_servers, EXTRA, b"x")
        caught_up = wait_until(lambda: (lambda n: n if n == _log_bytes(cluster, leader) else None)(
            _log_bytes(cluster, in_sync)), timeout=60, interval=0.05, what="the in-sync replica to keep up")
        elapsed = time.monotonic() - produced_at
        assert caught_up - before > EFFECTIVE_RATE * elapsed + SLACK, (caught_up - before, elapsed)
        samples.append((time.monotonic(), _log_bytes(cluster, new)))
        _within_rate(samples)
        assert in_sync in partition_info(cluster, TOPIC).isr

        # Without the rates of the leader and the new replica's broker (as kafka-configs
        # --delete-config removes them), the copy finishes.
        for node in (leader, new):
            deleted = _raftka("configs", "alter", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type",
                              "brokers", "--entity-name", str(node), "--delete-config",
                              "leader.replication.throttled.rate,follower.replication.throttled.rate")
            assert deleted.returncode == 0, deleted.stderr
        wait_partition(cluster, TOPIC, lambda p: set(p.isr) == {*info.replicas, new}, timeout=60,
                       what="the new replica to catch up and join the ISR")
        assert _log_bytes(cluster, new) == _log_bytes(cluster, leader)

        verified = wait_until(lambda: (lambda r: r if r.returncode == 0 else None)(
            _raftka("reassign", "verify", *plan_args)), timeout=60, interval=0.5, what="verify to report completion")
        assert verified.stdout.splitlines() == [
            "Status of partition reassignment:", f"Reassignment of partition {TOPIC}-0 is completed.",
            "Clearing broker-level throttles on brokers 1,2,3", f"Clearing topic-level throttles on topic {TOPIC}"]
        with Admin(cluster.bootstrap_servers) as admin:
            configs = admin.describe_configs(TOPIC)
            assert configs["leader.replication.throttled.replicas"].value == ""
            assert configs["follower.replication.throttled.replicas"].value == ""
