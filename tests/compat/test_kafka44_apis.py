"""Kafka 4.4's APIs that issue #29 found missing or unadvertised, through real clients:
kafka-python 3's admin client (DescribeQuorum v2, ApiVersions v4's features, DescribeGroups
v6) and librdkafka (ListOffsets' max-timestamp and earliest-local specs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient


@pytest.fixture(scope="module")
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    yield admin
    admin.close()


def test_describe_metadata_quorum(kp_admin: KafkaAdminClient, server) -> None:
    """kafka-python asks DescribeQuorum v2 (KIP-853) and reads its per-partition error_message."""
    described = kp_admin.describe_metadata_quorum()
    [topic] = described["topics"]
    [partition] = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata" and partition["error"] is None
    assert partition["leader_id"] == 1 and partition["high_watermark"] > 0
    assert [v["replica_id"] for v in partition["current_voters"]] == [1]
    [node] = described["nodes"]
    [listener] = node["listeners"]
    assert node["node_id"] == 1 and listener["name"] == "CONTROLLER" and listener["host"] == "127.0.0.1"
