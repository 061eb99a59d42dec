"""DescribeShareGroupOffsets v1's Lag on a real 3-node cluster, where the share group's
coordinator does not lead every partition: the end offsets of the others come from their
leaders (ListOffsets over the broker's peer connections), as Kafka 4.4's group coordinator
asks the leaders; a partition whose end offset cannot be had answers the lookup's error."""

from __future__ import annotations

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection, values_batch
from tests.integration.cluster_support import create_topic, running_cluster, wait_partition
from tests.support import wait_until

TOPIC = "lagged"
GROUP = "laggards"
PARTITIONS = 3
RECORDS = 10
STARTS = {0: 2, 1: 4, 2: 6}


def coordinator_of(cluster, group: str) -> int:
    with WireConnection(cluster.bootstrap.split(",")[0]) as conn:
        found = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(conn.find_coordinator(group)),
                           30, what=f"a coordinator for {group}")
    return found.node_id


def described(cluster, node: int) -> dict[int, tuple[int, int, int]]:
    """partition -> (start offset, lag, error) from DescribeShareGroupOffsets v1 at `node`."""
    with WireConnection(cluster.nodes[node].bootstrap) as conn:
        answer = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
            {"group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": list(range(PARTITIONS))}]}]})
    (group,) = answer.groups
    assert group.error_code == 0, group
    return {p.partition_index: (p.start_offset, p.lag, p.error_code) for t in group.topics for p in t.partitions}


def test_lag_of_partitions_led_elsewhere_comes_from_their_leaders(tmp_path) -> None:
    with running_cluster(tmp_path, 3) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, rf=1, configs={"min.insync.replicas": "1"})
        leaders = {p: wait_partition(cluster, TOPIC, lambda i: i.leader >= 0, partition=p,
                                     what=f"{TOPIC}-{p}'s leader").leader for p in range(PARTITIONS)}
        for p, leader in leaders.items():
            with WireConnection(cluster.nodes[leader].bootstrap) as conn:
                assert conn.produce(TOPIC, p, values_batch([b"%d" % i for i in range(RECORDS)])).error_code == 0
        coordinator = coordinator_of(cluster, GROUP)
        elsewhere = [p for p, leader in leaders.items() if leader != coordinator]
        assert elsewhere, f"every partition is led by the coordinator {coordinator}: nothing asked remotely"
        with WireConnection(cluster.nodes[coordinator].bootstrap) as conn:
            altered = wait_until(lambda: (lambda r: None if r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                                          else r)(conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
                                              "group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": [
                                                  {"partition_index": p, "start_offset": o}
                                                  for p, o in STARTS.items()]}]})), 30, what="the group loaded")
        assert altered.error_code == 0 and {p.error_code for t in altered.responses for p in t.partitions} == {0}
        # Lag = end offset - start offset - delivery complete count (0 after an alter).
        assert described(cluster, coordinator) == {p: (o, RECORDS - o, 0) for p, o in STARTS.items()}

        # A leader gone (replication factor 1: no other replica): its partition answers the
        # lookup's error in place of its offsets, the others still their lag.
        gone = elsewhere[0]
        cluster.kill(leaders[gone])
        wait_partition(cluster, TOPIC, lambda i: i.leader == -1, partition=gone, exclude={leaders[gone]},
                       what=f"{TOPIC}-{gone} without a leader")
        after = described(cluster, coordinator)
        assert after[gone] == (0, -1, ErrorCode.LEADER_NOT_AVAILABLE)
        assert {p: a for p, a in after.items() if leaders[p] != leaders[gone]} == {
            p: (o, RECORDS - o, 0) for p, o in STARTS.items() if leaders[p] != leaders[gone]}
