"""ISR maintenance and log divergence on real clusters (SIGSTOP/SIGCONT, real processes)."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka
import pytest

from raftka.log.batch_header import iter_headers
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.support import wait_until

pytestmark = pytest.mark.slow


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all",
            timeout_ms: int = 20000, retries: int = 1000) -> list[tuple[bytes, object]]:
    """Send `values` to partition 0; returns (value, error-or-offset) per message."""
    results: list[tuple[bytes, object]] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": timeout_ms,
        "retries": retries, "linger.ms": 1, "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
    for v in values:
        producer.produce(topic, value=v, partition=0,
                         on_delivery=lambda err, msg: results.append(
                             (msg.value(), err if err is not None else msg.offset())))
    producer.flush(timeout_ms / 1000 + 10)
    return results


def segment_headers(node_dir: Path, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, crc) of every batch of partition 0 on one node, from disk."""
    out = []
    for seg in sorted((node_dir / "data" / f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        try:
            out.extend((h.base_offset, h.last_offset, h.crc) for h in iter_headers(data))
        except Exception:  # a batch being written right now: compare again later
            return []
    return out


def test_isr_shrinks_and_min_isr_refuses_writes_then_recovers(tmp_path):
    # Five voters, so stopping two replicas of the partition leaves the quorum a majority.
    with running_cluster(tmp_path, nodes=5) as cluster:
        create_topic(cluster, "isr", 1, 3, {"min.insync.replicas": "2"})
        info = partition_info(cluster, "isr")
        leader = info.leader
        f1, f2 = [r for r in info.replicas if r != leader]
        cluster.pause(f1)
        try:
            wait_partition(cluster, "isr", lambda p: f1 not in p.isr, timeout=30, exclude={f1},
                           what="the stopped follower to leave the ISR")
            ok = produce(bootstrap_of(cluster, {f1}), "isr", [b"two-in-sync"])
            assert isinstance(ok[0][1], int), ok
            cluster.pause(f2)
            wait_partition(cluster, "isr", lambda p: p.isr == (leader,), timeout=30, exclude={f1, f2},
                           what="the ISR to shrink to the leader alone")
            refused = produce(bootstrap_of(cluster, {f1, f2}), "isr", [b"refused"], timeout_ms=3000, retries=0)
            err = refused[0][1]
            assert isinstance(err, confluent_kafka.KafkaError), refused
            assert err.code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS, err
        finally:
            cluster.resume(f1)
            cluster.resume(f2)
        wait_partition(cluster, "isr", lambda p: set(p.isr) == {leader, f1, f2}, timeout=40,
                       what="both followers back in the ISR")
        ok = produce(cluster.bootstrap_servers, "isr", [b"after"])
        assert isinstance(ok[0][1], int), ok


def test_divergent_uncommitted_tail_is_truncated_on_rejoin(tmp_path):
    extra = {"replica.lag.time.max.ms": "60000"}  # keep the ISR intact while followers are stopped
    with running_cluster(tmp_path, nodes=3, extra=extra) as cluster:
        # The followers' restart takes them out of the ISR (a re-registration after a crash, as
        # Kafka fences a broker that died): only an unclean election can then pick one while the
        # old leader is away, and its log wins. That is the divergence this test needs.
        create_topic(cluster, "div", 1, 3, {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
        old = partition_info(cluster, "div")
        leader = old.leader
        followers = [r for r in old.replicas if r != leader]
        committed = produce(cluster.bootstrap_servers, "div", [f"c{i}".encode() for i in range(100)])
        assert all(isinstance(r, int) for _, r in committed)

        # The followers crash (a SIGSTOP would leave a fetch response in flight that hands them
        # the data on resume): the leader alone accepts acks=1 writes it can never commit.
        for f in followers:
            cluster.kill(f)
        lost = produce(cluster.nodes[leader].bootstrap, "div", [f"u{i}".encode() for i in range(50)],
                       acks="1")
        assert all(isinstance(r, int) for _, r in lost), lost[:3]

        # The leader stops; the followers restart and one is elected, uncleanly (higher epoch).
        cluster.pause(leader)
        try:
            for f in followers:
                cluster.start_node(f)
            new = wait_partition(cluster, "div", lambda p: p.leader in followers, timeout=40,
                                 exclude={leader}, what="a follower elected leader")
            assert new.leader_epoch > old.leader_epoch
            after = produce(bootstrap_of(cluster, {leader}), "div", [f"n{i}".encode() for i in range(30)])
            offsets = [r for _, r in after]
            assert offsets == list(range(100, 130)), offsets[:5]
        finally:
            cluster.resume(leader)

        # The old leader rejoins as a follower: its divergent tail (offsets 100..149 of the old
        # epoch) is truncated and replaced by the new leader's batches.
        def identical_logs():
            logs = {i: segment_headers(cluster.nodes[i].directory, "div") for i in cluster.nodes}
            reference = logs[new.leader]
            return reference and reference[-1][1] == 129 and all(v == reference for v in logs.values())

        wait_until(identical_logs, timeout=40, interval=0.2, what="all three replicas to hold the same log")
        wait_partition(cluster, "div", lambda p: leader in p.isr, timeout=40, what="the old leader back in the ISR")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "v",
                                             "enable.auto.commit": False, "log_level": 0})
        consumer.assign([confluent_kafka.TopicPartition("div", 0, 0)])
        values = []
        try:
            while len(values) < 130:
                msg = consumer.poll(10)
                assert msg is not None, f"only {len(values)} messages readable"
                if not msg.error():
                    values.append(msg.value())
        finally:
            consumer.close()
        assert values == [v for v, _ in committed] + [v for v, _ in after]
