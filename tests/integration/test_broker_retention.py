"""The broker applies retention on its own: old segments go, the log start moves, reads follow."""

from __future__ import annotations

from raftka.client.blocking import Admin, Consumer, Producer
from raftka.client.records import TopicPartition
from tests.integration.cluster_support import create_topic, running_cluster
from tests.support import wait_until


def test_retention_bytes_deletes_old_segments_and_moves_log_start(tmp_path):
    extra = {"log.retention.check.interval.ms": "300"}
    with running_cluster(tmp_path, nodes=1, extra=extra) as cluster:
        create_topic(cluster, "short", 1, 1, {"segment.bytes": "4096", "retention.bytes": "8192"})
        with Producer(cluster.bootstrap_servers, acks="all", linger_ms=0) as producer:
            for i in range(300):
                producer.send("short", f"{i:05d}".encode() * 20).result(timeout=10)
        tp = TopicPartition("short", 0)
        with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            start = wait_until(lambda: consumer.beginning_offsets([tp])[tp] or None, timeout=30,
                               what="retention to move the log start offset")
            end = consumer.end_offsets([tp])[tp]
            assert 0 < start < end == 300
            consumer.assign([tp])
            seen = []
            while len(seen) < end - start:
                for records in consumer.poll(timeout_ms=2000).values():
                    seen.extend(records)
            assert seen[0].offset == start, "a consumer from 'earliest' starts at the new log start"
            assert [r.offset for r in seen] == list(range(start, end))
        part_dir = cluster.nodes[1].directory / "data" / "short-0"
        assert not (part_dir / "00000000000000000000.log").exists()
        with Admin(cluster.bootstrap_servers) as admin:
            assert admin.describe_configs(topic="short")["retention.bytes"].value == "8192"
