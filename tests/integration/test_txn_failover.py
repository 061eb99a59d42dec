"""Followers keep their own transaction state from the replicated log: DescribeProducers answers
from it on any replica, and after the leader is killed, the new leader serves read_committed
with the same aborted list and LSO (an open transaction still holds it back) and takes the open
transaction's marker."""

from __future__ import annotations

from raftka.client.protocol import ApiKey
from tests.compat.wire_client import WireConnection, values_batch
from tests.differential.kafka_jars import kafka_jars
from tests.differential.tools import run_tool
from tests.integration.cluster_support import (
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.integration.test_txn_partition import fetch, produce_txn, txn_records, write_marker
from tests.support import wait_until

TOPIC = "txn-failover"
SINGLE = "txn-failover-rf1"
TIMEOUT = 60.0
READ_COMMITTED = 1


def test_new_leader_serves_the_same_aborted_list_and_lso(tmp_path) -> None:
    jars = kafka_jars()
    with running_cluster(tmp_path, 3, extra={"transaction.partition.verification.enable": "false"}) as cluster:
        create_topic(cluster, TOPIC, rf=3)
        old = partition_info(cluster, TOPIC).leader
        with WireConnection(cluster.nodes[old].bootstrap, timeout=TIMEOUT) as conn:
            aborter, epoch = conn.init_producer_id()
            opener, _ = conn.init_producer_id()
            assert produce_txn(conn, TOPIC, txn_records([b"a1", b"a2"], aborter, epoch, 0)) == 0  # 0-1
            assert write_marker(conn, aborter, epoch, False, TOPIC) == {0: 0}  # 2, acked by the ISR
            assert conn.produce(TOPIC, 0, values_batch([b"plain"])).error_code == 0  # 3
            assert produce_txn(conn, TOPIC, txn_records([b"open"], opener, 0, 0)) == 0  # 4: left open
            assert conn.produce(TOPIC, 0, values_batch([b"after"])).error_code == 0  # 5
            before = fetch(conn, TOPIC, 0, READ_COMMITTED)
            assert (before.high_watermark, before.last_stable_offset) == (6, 4)
        # DescribeProducers on a follower answers from its own producer state, as Kafka's does
        # (`kafka-transactions find-hanging --broker-id N`); a broker not hosting the partition: 6.
        create_topic(cluster, SINGLE, rf=1)
        single_host = partition_info(cluster, SINGLE).leader
        for follower in sorted(set(cluster.nodes) - {old}):
            with WireConnection(cluster.nodes[follower].bootstrap, timeout=TIMEOUT) as conn:
                found = wait_until(lambda c=conn: both_producers(describe_producers(c, TOPIC)),
                                   timeout=TIMEOUT, what=f"broker {follower} describing the producers")
                assert {p.producer_id: p.current_txn_start_offset for p in found.active_producers} == \
                    {aborter: -1, opener: 4}
                if follower != single_host:
                    assert describe_producers(conn, SINGLE).error_code == 6
            # Kafka 4.4's own tool, asking the follower: the open transaction, then no hanging one.
            tool = ["--bootstrap-server", cluster.nodes[old].bootstrap]
            described = run_tool(jars, "kafka-transactions", [*tool, "describe-producers", "--topic", TOPIC,
                                                              "--partition", "0", "--broker-id", str(follower)])
            assert described.exit == 0, described.stderr
            rows = {line.split()[0]: line.split()[-1] for line in described.stdout.splitlines()[1:] if line.strip()}
            assert rows == {str(aborter): "None", str(opener): "4"}, described.stdout
            hanging = run_tool(jars, "kafka-transactions", [*tool, "find-hanging", "--broker-id", str(follower)])
            assert hanging.exit == 0 and hanging.stdout.split()[0] == "Topic", hanging
            assert len(hanging.stdout.strip().splitlines()) == 1, hanging  # the header, no row
        cluster.kill_node(old)
        new = wait_partition(cluster, TOPIC, lambda p: p.leader >= 0 and p.leader != old, timeout=TIMEOUT,
                             exclude={old}, what="a new leader").leader
        with WireConnection(cluster.nodes[new].bootstrap, timeout=TIMEOUT) as conn:
            result = wait_until(lambda: (lambda r: r if r.error_code == 0 and r.high_watermark == 6 else None)(
                fetch(conn, TOPIC, 0, READ_COMMITTED)), timeout=TIMEOUT, what="the new leader serving")
            assert result.last_stable_offset == 4  # the open transaction, known from the replicated log
            assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(aborter, 0)]
            producers = {p.producer_id: p.current_txn_start_offset
                         for p in describe_producers(conn, TOPIC).active_producers}
            assert producers == {aborter: -1, opener: 4}
            assert write_marker(conn, opener, 0, True, TOPIC) == {0: 0}  # 6: COMMIT on the new leader
            after = fetch(conn, TOPIC, 0, READ_COMMITTED)
            assert (after.high_watermark, after.last_stable_offset) == (7, 7)


def describe_producers(conn: WireConnection, topic: str):
    response = conn.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    return response.topics[0].partitions[0]


def both_producers(answer):
    return answer if answer.error_code == 0 and len(answer.active_producers) == 2 else None
