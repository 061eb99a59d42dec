"""The Prometheus endpoint on real nodes: live values after real traffic, an under-replicated
partition while a follower is down, and hostile HTTP bounded to its own connection."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from raftka.broker.metrics_http import MAX_CONNECTIONS
from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster
from tests.integration.cluster_support import bootstrap_of, create_topic, partition_info
from tests.support import wait_until

pytestmark = pytest.mark.timeout(240)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(sample: dict, name: str, **labels) -> float | None:
    return sample.get((name, tuple(sorted(labels.items()))))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("metrics"), 3, metrics=True, extra_config=FAST_FAILURE_DETECTION,
                     log_level="INFO")
    try:
        c.start_and_wait(90)
        yield c
    finally:
        c.stop(timeout=20)


def test_live_values_after_traffic(cluster):
    topic = "metered"
    create_topic(cluster, topic, partitions=1, rf=3)
    leader = partition_info(cluster, topic).leader
    producer = Producer({"bootstrap.servers": bootstrap_of(cluster), "acks": "all"})
    for i in range(200):
        producer.produce(topic, f"v{i}".encode() * 10)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap_of(cluster), "group.id": "metered-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    for _ in range(300):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen += 1
            if seen == 150:
                break
    assert seen == 150
    consumer.commit(asynchronous=False)
    consumer.close()

    urls = cluster.metrics_urls()
    on_leader = scrape(urls[leader])
    assert value(on_leader, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 200
    assert value(on_leader, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 0
    assert value(on_leader, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) > 0
    assert value(on_leader, "kafka_log_log_logendoffset", topic=topic, partition="0") == 200
    produce_requests = sum(v for (n, lb), v in on_leader.items()
                           if n == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in lb)
    assert produce_requests >= 1
    assert value(on_leader, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
    assert value(on_leader, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # Followers fetched the records: replication bytes on both sides.
    assert value(on_leader, "kafka_server_brokertopicmetrics_replicationbytesout_total") > 0
    follower = next(i for i in urls if i != leader)
    assert value(scrape(urls[follower]), "kafka_server_brokertopicmetrics_replicationbytesin_total") > 0
    # Exactly one active controller, and every voter reports the same term.
    scrapes = {i: scrape(u) for i, u in urls.items()}
    assert sum(value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes.values()) == 1
    assert sum(value(s, "raftka_quorum_role", role="leader") for s in scrapes.values()) == 1
    # The group's lag, on its coordinator: 200 written, 150 committed.
    lags = [value(s, "kafka_consumergroup_lag", consumergroup="metered-group", topic=topic, partition="0")
            for s in scrapes.values()]
    coordinator_lags = [lag for lag in lags if lag is not None]
    if not coordinator_lags:  # the coordinator does not lead the partition: its next refresh asks
        coordinator_lags = wait_until(
            lambda: [v for u in urls.values()
                     if (v := value(scrape(u), "kafka_consumergroup_lag", consumergroup="metered-group",
                                    topic=topic, partition="0")) is not None],
            timeout=90, interval=1, what="the consumer lag of a partition led elsewhere")
    assert coordinator_lags == [50]


def test_under_replicated_while_a_follower_is_down(cluster):
    topic = "metered-urp"
    create_topic(cluster, topic, partitions=1, rf=3)
    info = partition_info(cluster, topic)
    follower = next(r for r in info.replicas if r != info.leader)
    url = cluster.metrics_urls()[info.leader]
    cluster.stop_node(follower)
    try:
        wait_until(lambda: value(scrape(url), "kafka_cluster_partition_underreplicated",
                                 topic=topic, partition="0") == 1,
                   timeout=60, interval=0.5, what="the partition reported under-replicated")
        assert value(scrape(url), "kafka_server_replicamanager_underreplicatedpartitions") >= 1
    finally:
        cluster.start_node(follower, wait=True, timeout=90)
    wait_until(lambda: value(scrape(url), "kafka_server_replicamanager_underreplicatedpartitions") == 0,
               timeout=60, interval=0.5, what="the ISR full again")
    assert value(scrape(url), "kafka_server_replicamanager_isrexpands_total") >= 1


def test_hostile_http_costs_one_connection(cluster):
    url = cluster.metrics_urls()[1]
    host, port = "127.0.0.1", cluster.nodes[1].metrics_port
    # A header with no end is cut off at the size limit.
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000)
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    # Garbage gets 400; other paths 404.
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"\x00\x01\x02\x03\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    # Idle connections fill the slots; the next is closed at once, and the endpoint serves
    # again when they go.
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(MAX_CONNECTIONS)]
    try:
        wait_until(lambda: _closed_at_once(host, port), timeout=20, interval=0.2,
                   what="a connection beyond the limit closed at once")
    finally:
        for s in idle:
            s.close()
    wait_until(lambda: scrape(url), timeout=30, interval=0.2, what="a scrape served again")


def _closed_at_once(host: str, port: int) -> bool:
    with socket.create_connection((host, port), timeout=10) as s:
        s.settimeout(5)
        try:
            return s.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            return False
