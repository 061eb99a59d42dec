"""Fetching from the closest replica (KIP-392) on a real 3-node cluster with one rack per node:
a librdkafka consumer with `client.rack` set to a follower's rack is sent there by the leader
(preferred_read_replica) and reads every record from the follower."""

from __future__ import annotations

import confluent_kafka
import pytest

from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster
from tests.integration.cluster_support import create_topic, partition_info
from tests.integration.test_metrics_endpoint import scrape, value
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


class RackCluster(LocalCluster):
    def node_properties(self, node, voters, secret):
        return {**super().node_properties(node, voters, secret), "broker.rack": f"rack{node.node_id}"}


def test_consumer_reads_from_the_follower_in_its_rack(tmp_path):
    extra = {**FAST_FAILURE_DETECTION,
             "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    cluster = RackCluster(tmp_path, 3, metrics=True, extra_config=extra, log_level="INFO")
    try:
        cluster.start_and_wait(90)
        create_topic(cluster, "near", 1, 3)
        info = partition_info(cluster, "near")
        near = next(r for r in info.replicas if r != info.leader)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                             "log_level": 0})
        for i in range(300):
            producer.produce("near", value=b"n%03d" % i, partition=0)
        assert producer.flush(60) == 0
        wait_until(lambda: set(partition_info(cluster, "near").isr) == set(info.replicas), timeout=30,
                   what="a full ISR")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "near",
                                             "client.rack": f"rack{near}", "enable.auto.commit": False,
                                             "log_level": 0})
        consumer.assign([confluent_kafka.TopicPartition("near", 0, 0)])
        read: list[bytes] = []
        try:
            wait_until(lambda: read.extend(m.value() for m in consumer.consume(100, timeout=0.5)
                                           if m.error() is None) or len(read) >= 300, timeout=60,
                       interval=0, what="the 300 records")
        finally:
            consumer.close()
        assert sorted(read) == [b"n%03d" % i for i in range(300)]
        urls = cluster.metrics_urls()
        served = {n: value(scrape(urls[n]), BYTES_OUT, topic="near") or 0 for n in cluster.nodes}
        assert served[near] > 0, served  # the follower in the client's rack served the records
        assert served[info.leader] == 0, served
    finally:
        cluster.stop(timeout=20)
