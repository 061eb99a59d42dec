"""Table tests of the replication throttles' core (broker/replication/replication_quota.py): Kafka's
SimpleRate meter, the throttled-replica lists, the rate's precedence, and the two
decisions (shouldLeaderThrottle / shouldFollowerThrottle)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.broker.replication.replication_quota import (
    ALL_PARTITIONS,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LONG_MAX,
    ReplicationQuotas,
    SampledRate,
    throttle_rate,
    throttled_partitions,
)
from raftka.raft_meta.config.node_config import ConfigError, parse_node_config
from raftka.raft_meta.metadata.image import MetadataImage
from tests.unit.test_raft_meta_config import _props

# (name, samples, window_s, steps): ("record", t, bytes) or ("rate", t, expected bytes/s)
METER_CASES = [
    ("nothing recorded", 11, 1.0, [("rate", 5.0, 0.0)]),
    ("the first window counts as a whole window", 11, 1.0,
     [("record", 0.0, 1000), ("rate", 0.0, 1000.0), ("rate", 0.5, 1000.0)]),
    ("later, the time since the oldest sample started", 11, 1.0,
     [("record", 0.0, 1000), ("rate", 4.0, 250.0), ("rate", 10.0, 100.0)]),
    ("one window's bytes add up", 11, 1.0,
     [("record", 0.0, 500), ("record", 0.5, 500), ("rate", 0.5, 1000.0)]),
    ("a sample is forgotten samples * window after its last byte", 11, 1.0,
     [("record", 0.0, 1000), ("rate", 10.9, 1000 / 10.9), ("rate", 11.0, 0.0)]),
    ("a steady 100 B/s reads 100 B/s", 11, 1.0,
     [*(("record", float(t), 100) for t in range(30)), ("rate", 29.0, 1100 / 10)]),
    # samples=2: a sample expires 2 windows after its last byte: at t=2 the t=0 one (100 + 100
    # over 2 - 1 = 1 s); at t=3 the t=1 one, and slot 0 is recycled for t=3's bytes.
    ("slots are recycled and expired samples purged", 2, 1.0,
     [("record", 0.0, 100), ("record", 1.0, 100), ("record", 2.0, 100), ("rate", 2.0, 200.0),
      ("record", 3.0, 100), ("rate", 3.0, 200.0)]),
    ("windows of 2 s", 3, 2.0, [("record", 0.0, 600), ("rate", 1.0, 300.0), ("rate", 3.0, 200.0)]),
]


@pytest.mark.parametrize(("name", "samples", "window", "steps"), METER_CASES, ids=[c[0] for c in METER_CASES])
def test_sampled_rate(name, samples, window, steps) -> None:
    meter = SampledRate(samples, window)
    for op, t, value in steps:
        if op == "record":
            meter.record(value, t)
        else:
            assert meter.rate(t) == pytest.approx(value), (name, t)


def test_exceeds_is_strictly_over_the_bound() -> None:
    meter = SampledRate(11, 1.0)
    meter.record(200, 0.0)
    assert meter.exceeds(199, 0.5)
    assert not meter.exceeds(200, 0.5)


def test_meter_refuses_a_meaningless_window() -> None:
    with pytest.raises(ValueError, match="samples 0"):
        SampledRate(0, 1.0)


# (value, broker, expected partitions or ALL_PARTITIONS)
LIST_CASES = [
    ("*", 1, ALL_PARTITIONS),
    (" * ", 7, ALL_PARTITIONS),
    ("", 1, frozenset()),
    ("0:1,1:2,2:1", 1, frozenset({0, 2})),
    ("0:1,1:2,2:1", 2, frozenset({1})),
    (" 0:1 , 3:1 ", 1, frozenset({0, 3})),
    ("0:2", 1, frozenset()),
    ("0:1,junk,2", 1, frozenset({0})),  # never stored (validated), and harmless
]


@pytest.mark.parametrize(("value", "broker", "expected"), LIST_CASES)
def test_throttled_partitions(value, broker, expected) -> None:
    assert throttled_partitions(value, broker) == expected


def _image(topic_configs=None, broker=None, cluster=None) -> MetadataImage:
    configs = {}
    if topic_configs is not None:
        configs[("topic", "t")] = topic_configs
    if broker is not None:
        configs[("broker", "1")] = broker
    if cluster is not None:
        configs[("cluster", "")] = cluster
    return MetadataImage(configs=configs)


# (name, broker 1's dynamic configs, cluster default, static, expected leader rate on broker 1)
RATE_CASES = [
    ("unset everywhere: Long.MAX", None, None, {}, LONG_MAX),
    ("server.properties", None, None, {LEADER_RATE: "500"}, 500),
    ("the cluster default beats server.properties", None, {LEADER_RATE: "400"}, {LEADER_RATE: "500"}, 400),
    ("the broker's own beats the cluster default", {LEADER_RATE: "300"}, {LEADER_RATE: "400"}, {}, 300),
    ("the other side's key does not count", {FOLLOWER_RATE: "1"}, None, {}, LONG_MAX),
]


@pytest.mark.parametrize(("name", "broker", "cluster", "static", "expected"), RATE_CASES,
                         ids=[c[0] for c in RATE_CASES])
def test_throttle_rate_precedence(name, broker, cluster, static, expected) -> None:
    assert throttle_rate(_image(broker=broker, cluster=cluster), 1, LEADER_RATE, static) == expected


def test_another_brokers_rate_does_not_apply() -> None:
    image = MetadataImage(configs={("broker", "2"): {LEADER_RATE: "1"}})
    assert throttle_rate(image, 1, LEADER_RATE, {}) == LONG_MAX


# (name, topic configs, rate on broker 1, bytes already recorded, partition, ISR, fetching replica, throttled?)
LEADER_CASES = [
    ("over quota, listed, out of sync", {LEADER_REPLICAS: "0:1"}, "100", 10_000, 0, (1,), 3, True),
    ("an in-sync replica is never throttled", {LEADER_REPLICAS: "0:1"}, "100", 10_000, 0, (1, 3), 3, False),
    ("under quota", {LEADER_REPLICAS: "0:1"}, "100", 50, 0, (1,), 3, False),
    ("no rate set: unthrottled", {LEADER_REPLICAS: "0:1"}, None, 10_000, 0, (1,), 3, False),
    ("the list names another leader", {LEADER_REPLICAS: "0:2"}, "100", 10_000, 0, (1,), 3, False),
    ("another partition of the topic", {LEADER_REPLICAS: "0:1"}, "100", 10_000, 1, (1,), 3, False),
    ("* throttles every partition", {LEADER_REPLICAS: "*"}, "100", 10_000, 5, (1,), 3, True),
    ("only the follower list is set", {FOLLOWER_REPLICAS: "*"}, "100", 10_000, 0, (1,), 3, False),
]


@pytest.mark.parametrize(("name", "topic_configs", "rate", "recorded", "partition", "isr", "replica", "expected"),
                         LEADER_CASES, ids=[c[0] for c in LEADER_CASES])
def test_leader_throttles(name, topic_configs, rate, recorded, partition, isr, replica, expected) -> None:
    image = _image(topic_configs, broker=None if rate is None else {LEADER_RATE: rate})
    quotas = ReplicationQuotas(1)
    quotas.leader.record(recorded, 0.0)
    assert quotas.leader_throttles(image, "t", partition, isr, replica, 0.5) is expected


# (name, topic configs, rate on broker 1, recorded, caught up with the leader's HW?, throttled?)
FOLLOWER_CASES = [
    ("over quota, listed, behind", {FOLLOWER_REPLICAS: "0:1"}, "100", 10_000, False, True),
    ("caught up: never throttled", {FOLLOWER_REPLICAS: "0:1"}, "100", 10_000, True, False),
    ("under quota", {FOLLOWER_REPLICAS: "0:1"}, "100", 10, False, False),
    ("the list names another follower", {FOLLOWER_REPLICAS: "0:3"}, "100", 10_000, False, False),
    ("only the leader list is set", {LEADER_REPLICAS: "*"}, "100", 10_000, False, False),
]


@pytest.mark.parametrize(("name", "topic_configs", "rate", "recorded", "in_sync", "expected"), FOLLOWER_CASES,
                         ids=[c[0] for c in FOLLOWER_CASES])
def test_follower_throttles(name, topic_configs, rate, recorded, in_sync, expected) -> None:
    image = _image(topic_configs, broker={FOLLOWER_RATE: rate})
    quotas = ReplicationQuotas(1)
    quotas.follower.record(recorded, 0.0)
    assert quotas.follower_throttles(image, "t", 0, in_sync, 0.5) is expected


def test_leader_records_every_throttled_partition_of_a_follower_fetch() -> None:
    """sizeOfThrottledPartitions: throttled partitions count, in sync or not; others do not."""
    image = MetadataImage(configs={("topic", "t"): {LEADER_REPLICAS: "0:1,1:1"}, ("topic", "u"): {}})
    quotas = ReplicationQuotas(1)
    quotas.record_leader_response(image, [("t", 0, 100), ("t", 1, 20), ("t", 2, 5), ("u", 0, 1000)], 0.0)
    assert quotas.leader.throttled_bytes == 120
    assert quotas.leader.meter.rate(0.0) == 120


def test_server_properties_rates_and_windows(tmp_path: Path) -> None:
    config = parse_node_config(_props(tmp_path), env={})
    assert (config.leader_replication_throttled_rate, config.follower_replication_throttled_rate) == (LONG_MAX,
                                                                                                    LONG_MAX)
    assert (config.replication_quota_window_num, config.replication_quota_window_size_seconds) == (11, 1)
    config = parse_node_config(_props(tmp_path, **{
        "leader.replication.throttled.rate": "1000", "replication.quota.window.num": "3",
        "replication.quota.window.size.seconds": "2"}), env={})
    quotas = ReplicationQuotas.from_config(config)
    assert quotas.leader.bound(MetadataImage()) == 1000
    assert quotas.follower.bound(MetadataImage()) == LONG_MAX
    assert (quotas.leader.meter.samples, quotas.leader.meter.window_s) == (3, 2.0)
    with pytest.raises(ConfigError, match="'replication.quota.window.num': got '0', expected an integer > 0"):
        parse_node_config(_props(tmp_path, **{"replication.quota.window.num": "0"}), env={})
