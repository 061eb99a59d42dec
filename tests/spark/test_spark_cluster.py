"""A batch read from a real 3-node cluster, before and after a partition leader dies."""

from __future__ import annotations

from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.spark.spark_support import produce

TOPIC = "replicated"


def _read(spark, bootstrap: str) -> list[tuple[int, int, bytes]]:
    df = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", TOPIC).load())
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def test_read_from_three_nodes_survives_a_leader_crash(spark, tmp_path) -> None:
    with running_cluster(tmp_path, nodes=3) as cluster:
        create_topic(cluster, TOPIC, partitions=3, rf=3)
        produced = produce(bootstrap_of(cluster), TOPIC, 150, headers=False)
        expected = sorted((r["partition"], r["offset"], r["value"]) for r in produced)
        assert _read(spark, bootstrap_of(cluster)) == expected

        victim = partition_info(cluster, TOPIC, 0).leader
        cluster.kill(victim)
        for p in range(3):
            wait_partition(cluster, TOPIC, lambda info: info.leader not in (-1, victim),
                           partition=p, exclude={victim}, timeout=60,
                           what=f"a new leader for {TOPIC}/{p}")
        # Acknowledged (acks=all) records are all still there, read from the new leaders.
        assert _read(spark, bootstrap_of(cluster, exclude={victim})) == expected
