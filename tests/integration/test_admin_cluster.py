"""DeleteRecords, ElectLeaders and DescribeLogDirs on a real 3-node cluster, through
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient."""

from __future__ import annotations

from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster_support import bootstrap_of, running_cluster, wait_partition
from tests.support import wait_until

TIMEOUT = 30.0


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm-probe", "enable.auto.commit": False})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        consumer.close()


def test_delete_records_elect_leaders_and_log_dirs(tmp_path) -> None:
    with running_cluster(tmp_path, nodes=3, extra={"auto.leader.rebalance.enable": "false"}) as cluster:
        bootstrap = bootstrap_of(cluster)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("dr", 1, replica_assignment=[[1, 2, 3]])],
                            operation_timeout=TIMEOUT)["dr"].result(TIMEOUT)
        wait_partition(cluster, "dr", lambda p: p.leader == 1 and len(p.isr) == 3, what="dr led by 1, full ISR")
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("dr", value=b"v%d" % i, partition=0)
        assert producer.flush(TIMEOUT) == 0

        # DeleteRecords: answered once the leader and its live followers start at 6
        [deleted] = admin.delete_records([TopicPartition("dr", 0, 6)], operation_timeout=TIMEOUT).values()
        assert deleted.result(TIMEOUT).low_watermark == 6
        assert _watermarks(bootstrap, "dr") == (6, 10)
        [beyond] = admin.delete_records([TopicPartition("dr", 0, 11)], operation_timeout=TIMEOUT).values()
        try:
            beyond.result(TIMEOUT)
            raise AssertionError("DeleteRecords beyond the high watermark succeeded")
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

        # The followers moved too: the leader dies, the new one starts at 6.
        cluster.kill(1)
        wait_partition(cluster, "dr", lambda p: p.leader in (2, 3), exclude={1}, what="a new leader for dr")
        wait_until(lambda: _watermarks(bootstrap_of(cluster), "dr") == (6, 10), timeout=TIMEOUT, interval=0.2,
                   what="dr's watermarks (6, 10) on the new leader")

        # ... and it survives a restart: node 1 comes back, preferred election makes it lead again.
        cluster.start_node(1, wait=True)
        wait_partition(cluster, "dr", lambda p: len(p.isr) == 3, what="node 1 back in the ISR")
        # (no request_timeout=: any keyword crashes confluent-kafka 2.16.1's elect_leaders binding)
        result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("dr", 0)]).result(TIMEOUT)
        assert result == {TopicPartition("dr", 0): None}
        wait_partition(cluster, "dr", lambda p: p.leader == 1, what="node 1 leading dr again")
        # a new leader's high watermark catches up once its followers fetch: wait for it
        wait_until(lambda: _watermarks(bootstrap_of(cluster), "dr") == (6, 10), timeout=TIMEOUT, interval=0.2,
                   what="dr's watermarks (6, 10) on the restarted leader")

        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("dr", 0)]).result(TIMEOUT)
        assert again[TopicPartition("dr", 0)].code() == KafkaError.ELECTION_NOT_NEEDED
        unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("dr", 0)]).result(TIMEOUT)
        assert unclean[TopicPartition("dr", 0)].code() == KafkaError.ELECTION_NOT_NEEDED  # it has a leader

        # UNCLEAN: dr2's replicas are 2 and 3; 3 falls out of the ISR, then 2 dies and 3 comes back:
        # no ISR member is live, so the partition has no leader until an unclean election.
        admin.create_topics([NewTopic("dr2", 1, replica_assignment=[[2, 3]])],
                            operation_timeout=TIMEOUT)["dr2"].result(TIMEOUT)
        wait_partition(cluster, "dr2", lambda p: p.leader == 2 and len(p.isr) == 2, what="dr2 led by 2")
        cluster.kill(3)
        wait_partition(cluster, "dr2", lambda p: tuple(p.isr) == (2,), exclude={3}, what="3 out of dr2's ISR")
        cluster.kill(2)  # only node 1 runs until node 3 is back: the quorum waits for it
        cluster.start_node(3, wait=True)
        wait_partition(cluster, "dr2", lambda p: p.leader < 0, exclude={2}, what="dr2 leaderless")
        admin = AdminClient({"bootstrap.servers": bootstrap_of(cluster)})
        elected = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("dr2", 0)]).result(TIMEOUT)
        assert elected == {TopicPartition("dr2", 0): None}
        wait_partition(cluster, "dr2", lambda p: p.leader == 3 and tuple(p.isr) == (3,), exclude={2},
                       what="3 elected uncleanly")
        cluster.start_node(2, wait=True)

        # DescribeLogDirs (kafka-python): broker 1's dir holds dr-0 with its bytes.
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=bootstrap_of(cluster))
        try:
            [answer] = client.describe_log_dirs(topic_partitions={"dr": [0]}, brokers=[1])
            assert answer["broker"] == 1
            [log_dir] = answer["log_dirs"]
            assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0
            [topic] = log_dir["topics"]
            assert topic["name"] == "dr"
            [part] = topic["partitions"]
            assert part["partition_index"] == 0 and part["partition_size"] > 0
        finally:
            client.close()
