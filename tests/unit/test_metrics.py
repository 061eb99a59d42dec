"""broker/metrics.py: names as the JMX exporter renders Kafka's MBeans, Yammer's percentiles,
and the endpoint's routing — table-driven, no broker."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from raftka.broker import metrics as m
from raftka.broker.metrics_http import route


@pytest.mark.parametrize("enum_name, kafka_name", [
    ("PRODUCE", "Produce"),
    ("API_VERSIONS", "ApiVersions"),
    ("OFFSET_FOR_LEADER_EPOCH", "OffsetForLeaderEpoch"),
    ("DESCRIBE_QUORUM", "DescribeQuorum"),
])
def test_request_names_are_kafkas(enum_name, kafka_name):
    assert m.request_name(enum_name) == kafka_name


@pytest.mark.parametrize("samples, expected", [
    # Yammer's Snapshot.getValue: position q * (n + 1), interpolated, clamped to the ends.
    ([], {0.5: 0.0, 0.99: 0.0}),
    ([7.0], {0.5: 7.0, 0.99: 7.0}),
    ([1.0, 2.0, 3.0, 4.0], {0.5: 2.5, 0.75: 3.75, 0.99: 4.0}),
    (list(range(1, 101)), {0.5: 50.5, 0.95: 95.95, 0.99: 99.99, 0.999: 100.0}),
])
def test_percentiles_follow_yammer(samples, expected):
    times = m.RequestTimes()
    for s in samples:
        times.record(s)
    got = dict(times.quantiles())
    for q, value in expected.items():
        assert got[q] == pytest.approx(value)


def test_reservoir_keeps_the_latest_window():
    times = m.RequestTimes()
    for i in range(m.RESERVOIR_SIZE + 500):
        times.record(1000.0 if i < 500 else 1.0)
    assert times.count == m.RESERVOIR_SIZE + 500
    assert dict(times.quantiles())[0.999] == 1.0  # the old slow samples left the window


@pytest.mark.parametrize("head, status, served", [
    (b"GET /metrics HTTP/1.1\r\nHost: x", "200 OK", True),
    (b"GET /metrics?name[]=x HTTP/1.0", "200 OK", True),
    (b"GET / HTTP/1.1", "200 OK", False),
    (b"POST /metrics HTTP/1.1", "405 Method Not Allowed", False),
    (b"GET /admin HTTP/1.1", "404 Not Found", False),
    (b"\x16\x03\x01\x02\x00", "400 Bad Request", False),  # a TLS ClientHello
    (b"GET /metrics", "400 Bad Request", False),
    (b"", "400 Bad Request", False),
])
def test_routes(head, status, served):
    got_status, body, _ = route(head)
    assert got_status == status
    assert (body is None) == served


def _snapshot(**over) -> m.Snapshot:
    base = dict(
        node_id=1,
        partitions=[
            m.PartitionStat("t", 0, True, replicas=3, isr=3, min_isr=2, size_bytes=500, log_start_offset=0,
                            log_end_offset=10, segments=1),
            m.PartitionStat("t", 1, True, replicas=3, isr=2, min_isr=2, size_bytes=0, log_start_offset=0,
                            log_end_offset=0, segments=1),
            m.PartitionStat("t", 2, True, replicas=3, isr=1, min_isr=2, size_bytes=0, log_start_offset=0,
                            log_end_offset=0, segments=1),
            m.PartitionStat("u", 0, False, replicas=3, isr=1, min_isr=2, size_bytes=9, log_start_offset=3,
                            log_end_offset=4, segments=2),
        ],
        active_controller=True, offline_partitions=1, global_partitions=7, global_topics=2,
        fenced_brokers=1, active_brokers=2,
        quorum=m.QuorumStat(role="follower", term=4, commit_index=90, applied_offset=88, leader_id=2, observers=3),
        groups=[m.GroupOffset("g", "t", 0, committed=4, end_offset=10),
                m.GroupOffset("g", "u", 0, committed=1, end_offset=None)],
        groups_by_state={"Stable": 1},
        open_connections=5,
        leader_replication_byte_rate=1500.0,
        follower_replication_byte_rate=20.5,
        client_quotas={"Produce": [("alice", "", 1000.0, 250.0)], "Fetch": [("", "c1", 64.0, 0.0)],
                       "Request": [("bob", "", 12.5, 400.0)], "ControllerMutation": [("", "adm", 3.0, 900.0)]},
        mutation_tokens=[("", "adm", -2.5)],
    )
    base.update(over)
    return m.Snapshot(**base)


def _scrape(metrics: m.BrokerMetrics, snap: m.Snapshot) -> dict[tuple[str, tuple], float]:
    text = m.render(m.families(metrics, snap)).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _counters() -> m.BrokerMetrics:
    metrics = m.BrokerMetrics()
    metrics.produced("t", 10, 1000)
    metrics.produced("u", 5, 300)
    metrics.produced("t", 1, 100)
    metrics.fetched("t", 700, follower=False)
    metrics.fetched("t", 900, follower=True)
    metrics.produce_failed("u")
    metrics.request_done("Produce", 9, 0.002)
    metrics.request_done("Produce", 9, 0.004)
    metrics.request_done("Produce", 3, 0.001)
    metrics.isr_shrinks += 2
    metrics.loop_lag(0.25, 100.0)
    metrics.loop_lag(0.01, 100.5)
    return metrics


EXPECTED = [
    # (sample name, labels, value)
    ("kafka_server_brokertopicmetrics_messagesin_total", {}, 16),
    ("kafka_server_brokertopicmetrics_messagesin_total", {"topic": "t"}, 11),
    ("kafka_server_brokertopicmetrics_messagesin_total", {"topic": "u"}, 5),
    ("kafka_server_brokertopicmetrics_bytesin_total", {}, 1400),
    ("kafka_server_brokertopicmetrics_bytesout_total", {"topic": "t"}, 700),
    ("kafka_server_brokertopicmetrics_replicationbytesout_total", {}, 900),
    ("kafka_server_brokertopicmetrics_failedproducerequests_total", {"topic": "u"}, 1),
    ("kafka_server_replicamanager_partitioncount", {}, 4),
    ("kafka_server_replicamanager_leadercount", {}, 3),
    ("kafka_server_replicamanager_underreplicatedpartitions", {}, 2),  # followers don't count
    ("kafka_server_replicamanager_underminisrpartitioncount", {}, 1),
    ("kafka_server_replicamanager_atminisrpartitioncount", {}, 1),
    ("kafka_server_replicamanager_isrshrinks_total", {}, 2),
    ("kafka_controller_kafkacontroller_activecontrollercount", {}, 1),
    ("kafka_controller_kafkacontroller_offlinepartitionscount", {}, 1),
    ("kafka_controller_kafkacontroller_fencedbrokercount", {}, 1),
    ("kafka_log_log_size", {"topic": "t", "partition": "0"}, 500),
    ("kafka_log_log_logstartoffset", {"topic": "u", "partition": "0"}, 3),
    ("kafka_log_log_numlogsegments", {"topic": "u", "partition": "0"}, 2),
    ("kafka_cluster_partition_underreplicated", {"topic": "t", "partition": "2"}, 1),
    ("kafka_cluster_partition_underreplicated", {"topic": "t", "partition": "0"}, 0),
    ("kafka_network_requestmetrics_requests_total", {"request": "Produce", "version": "9"}, 2),
    ("kafka_network_requestmetrics_requests_total", {"request": "Produce", "version": "3"}, 1),
    ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.50"}, 2.0),
    ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.99"}, 4.0),
    ("kafka_network_requestmetrics_totaltimems_count", {"request": "Produce"}, 3),
    ("kafka_server_socketservermetrics_connection_count", {}, 5),
    ("kafka_server_leaderreplication_byte_rate", {}, 1500.0),
    ("kafka_server_followerreplication_byte_rate", {}, 20.5),
    ("kafka_server_produce_byte_rate", {"user": "alice", "client_id": ""}, 1000.0),
    ("kafka_server_produce_throttle_time", {"user": "alice", "client_id": ""}, 250.0),
    ("kafka_server_fetch_byte_rate", {"user": "", "client_id": "c1"}, 64.0),
    ("kafka_server_request_request_time", {"user": "bob", "client_id": ""}, 12.5),
    ("kafka_server_request_throttle_time", {"user": "bob", "client_id": ""}, 400.0),
    ("kafka_server_controllermutation_mutation_rate", {"user": "", "client_id": "adm"}, 3.0),
    ("kafka_server_controllermutation_throttle_time", {"user": "", "client_id": "adm"}, 900.0),
    ("kafka_server_controllermutation_tokens", {"user": "", "client_id": "adm"}, -2.5),
    ("kafka_consumergroup_lag", {"consumergroup": "g", "topic": "t", "partition": "0"}, 6),
    ("kafka_consumergroup_current_offset", {"consumergroup": "g", "topic": "u", "partition": "0"}, 1),
    ("kafka_coordinator_group_groupmetadatamanager_numgroups", {"state": "Stable"}, 1),
    ("raftka_quorum_role", {"role": "follower"}, 1),
    ("raftka_quorum_role", {"role": "leader"}, 0),
    ("raftka_quorum_role", {"role": "observer"}, 0),
    ("raftka_quorum_term", {}, 4),
    ("raftka_quorum_commit_lag", {}, 2),
    ("raftka_quorum_leader_id", {}, 2),
    ("raftka_quorum_observers", {}, 3),
    ("raftka_eventloop_lag_seconds", {}, 0.01),
    ("raftka_eventloop_lag_max_seconds", {}, 0.25),
    ("raftka_eventloop_stalls_total", {}, 1),
]


@pytest.mark.parametrize("name, labels, value", EXPECTED, ids=[f"{n}{sorted(lb.items())}" for n, lb, _ in EXPECTED])
def test_families(name, labels, value):
    got = _scrape(_counters(), _snapshot())
    assert got[(name, tuple(sorted(labels.items())))] == pytest.approx(value)


def test_lag_is_absent_when_the_end_offset_is_unknown():
    got = _scrape(_counters(), _snapshot())
    assert ("kafka_consumergroup_lag", (("consumergroup", "g"), ("partition", "0"), ("topic", "u"))) not in got


def test_controller_gauges_are_zero_off_the_active_controller():
    got = _scrape(m.BrokerMetrics(), _snapshot(active_controller=False))
    assert got[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert got[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    assert got[("kafka_controller_kafkacontroller_globalpartitioncount", ())] == 0


def test_no_quorum_no_quorum_metrics():
    got = _scrape(m.BrokerMetrics(), _snapshot(quorum=None))
    assert not any(name.startswith("raftka_quorum") for name, _ in got)
