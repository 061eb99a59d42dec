"""Real multi-node clusters for tests: LocalCluster on free loopback ports, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from raftka.client.blocking import Admin
from raftka.client.metadata import PartitionInfo
from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster
from tests.support import wait_until


@contextmanager
def running_cluster(directory: Path, nodes: int = 3, extra: Mapping[str, str] | None = None,
                    timeout: float = 60.0) -> Iterator[LocalCluster]:
    cluster = LocalCluster(directory, nodes, extra_config={**FAST_FAILURE_DETECTION, **(extra or {})},
                           log_level="INFO")
    try:
        cluster.start_and_wait(timeout)
        yield cluster
    finally:
        cluster.stop(timeout=20)


def bootstrap_of(cluster: LocalCluster, exclude: set[int] = frozenset()) -> str:
    return ",".join(n.bootstrap for i, n in cluster.nodes.items() if i not in exclude and n.running)


def partition_info(cluster: LocalCluster, topic: str, partition: int = 0,
                   exclude: set[int] = frozenset()) -> PartitionInfo:
    with Admin(bootstrap_of(cluster, exclude)) as admin:
        (desc,) = admin.describe_topics([topic])
        return next(p for p in desc.partitions if p.partition == partition)


def wait_partition(cluster: LocalCluster, topic: str, predicate, timeout: float = 30.0, partition: int = 0,
                   exclude: set[int] = frozenset(), what: str = "partition state") -> PartitionInfo:
    return wait_until(lambda: (lambda p: p if predicate(p) else None)(
        partition_info(cluster, topic, partition, exclude)), timeout=timeout, interval=0.1, what=what)


def create_topic(cluster: LocalCluster, topic: str, partitions: int = 1, rf: int = 3,
                 configs: Mapping[str, str] | None = None) -> None:
    from raftka.client.admin import NewTopic

    with Admin(bootstrap_of(cluster)) as admin:
        admin.create_topics([NewTopic(topic, partitions, rf, dict(configs or {}))])
    wait_partition(cluster, topic, lambda p: p.leader >= 0 and len(p.isr) == rf,
                   what=f"{topic} to have a leader and a full ISR")
