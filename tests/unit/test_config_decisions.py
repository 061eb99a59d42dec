"""Table tests of the admin decisions: (Incremental)AlterConfigs, min.insync.replicas against the
replication factor, and manual replica assignments (CreateTopics / CreatePartitions)."""

from __future__ import annotations

import pytest

from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.controller.config_decisions import (
    APPEND,
    DELETE,
    SUBTRACT,
    AlterResource,
    ConfigOp,
    alter_configs,
)
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.records import Config, FenceBroker, Partition, Topic
from tests.unit.test_raft_meta_controller import cluster, commit

T = "tid"


def two_replica_topic(configs=()):
    return [Topic("t", T, tuple(configs)), Partition(T, 0, (1, 2), (1, 2), 1)]


def res(name: str, *ops: ConfigOp, kind: str = "topic", incremental: bool = True) -> AlterResource:
    return AlterResource(kind, name, tuple(ops), incremental)


# (name, image records, resources, expected records, expected errors by position (name, text))
ALTER_CASES = [
    ("incremental set: one record", two_replica_topic(), [res("t", ConfigOp("retention.ms", "1000"))],
     [Config("topic", "t", "retention.ms", "1000")], {}),
    ("a stored-only Kafka key is accepted", two_replica_topic(),
     [res("t", ConfigOp("compression.type", "zstd"), ConfigOp("min.cleanable.dirty.ratio", "0.2"))],
     [Config("topic", "t", "compression.type", "zstd"), Config("topic", "t", "min.cleanable.dirty.ratio", "0.2")], {}),
    ("incremental delete of an existing key", two_replica_topic([("retention.ms", "5")]),
     [res("t", ConfigOp("retention.ms", None, DELETE))], [Config("topic", "t", "retention.ms", None)], {}),
    ("setting the current value writes nothing", two_replica_topic([("retention.ms", "5")]),
     [res("t", ConfigOp("retention.ms", "5"))], [], {}),
    ("legacy AlterConfigs replaces the whole set", two_replica_topic([("retention.ms", "5"), ("segment.ms", "9")]),
     [res("t", ConfigOp("segment.ms", "10"), incremental=False)],
     [Config("topic", "t", "retention.ms", None), Config("topic", "t", "segment.ms", "10")], {}),
    ("append and subtract on a list key", two_replica_topic([("cleanup.policy", "delete")]),
     [res("t", ConfigOp("cleanup.policy", "compact", APPEND))],
     [Config("topic", "t", "cleanup.policy", "delete,compact")], {}),
    ("append to an unset list key starts from its default", two_replica_topic(),
     [res("t", ConfigOp("cleanup.policy", "compact", APPEND))],
     [Config("topic", "t", "cleanup.policy", "delete,compact")], {}),
    ("subtract the last item deletes the key", two_replica_topic([("cleanup.policy", "compact")]),
     [res("t", ConfigOp("cleanup.policy", "compact", SUBTRACT))], [Config("topic", "t", "cleanup.policy", None)], {}),
    ("append on a non-list key", two_replica_topic(), [res("t", ConfigOp("retention.ms", "5", APPEND))], [],
     {0: ("INVALID_CONFIG", "only allowed for list-typed configs")}),
    ("unknown topic", two_replica_topic(), [res("nope", ConfigOp("retention.ms", "1"))], [],
     {0: ("UNKNOWN_TOPIC_OR_PARTITION", "'nope' does not exist")}),
    ("unknown key", two_replica_topic(), [res("t", ConfigOp("retention.msec", "1"))], [],
     {0: ("INVALID_CONFIG", "Unknown topic config name: retention.msec")}),
    ("bad value", two_replica_topic(), [res("t", ConfigOp("min.cleanable.dirty.ratio", "2"))], [],
     {0: ("INVALID_CONFIG", "Invalid value '2' for configuration min.cleanable.dirty.ratio")}),
    ("min.insync.replicas above the replication factor", two_replica_topic(),
     [res("t", ConfigOp("min.insync.replicas", "3"))], [],
     {0: ("INVALID_CONFIG", "min.insync.replicas 3 of topic 't' is larger than its replication factor 2")}),
    ("min.insync.replicas equal to the replication factor", two_replica_topic(),
     [res("t", ConfigOp("min.insync.replicas", "2"))], [Config("topic", "t", "min.insync.replicas", "2")], {}),
    ("one bad resource does not stop the others", two_replica_topic(),
     [res("nope", ConfigOp("retention.ms", "1")), res("t", ConfigOp("retention.ms", "2"))],
     [Config("topic", "t", "retention.ms", "2")], {0: ("UNKNOWN_TOPIC_OR_PARTITION", "does not exist")}),
    ("a resource named twice", two_replica_topic(),
     [res("t", ConfigOp("retention.ms", "1")), res("t", ConfigOp("retention.ms", "2"))], [],
     {0: ("INVALID_REQUEST", "more than once"), 1: ("INVALID_REQUEST", "more than once")}),
    ("broker default (empty name) is the cluster-wide config", [],
     [res("", ConfigOp("log.retention.ms", "60000"), kind="broker")],
     [Config("cluster", "", "log.retention.ms", "60000")], {}),
    ("a broker's own dynamic config", [],
     [res("2", ConfigOp("unclean.leader.election.enable", "TRUE"), kind="broker")],
     [Config("broker", "2", "unclean.leader.election.enable", "true")], {}),
    ("a static broker key cannot change dynamically", [],
     [res("1", ConfigOp("log.dirs", "/x"), kind="broker")], [],
     {0: ("INVALID_REQUEST", "'log.dirs' cannot be updated dynamically")}),
    ("a static key of Kafka's catalogue raftka has no key for cannot change dynamically either", [],
     [res("", ConfigOp("controlled.shutdown.enable", "false"), kind="broker")], [],
     {0: ("INVALID_REQUEST", "'controlled.shutdown.enable' cannot be updated dynamically")}),
    ("an unknown key on one broker is stored as given (Kafka 4.4)", [],
     [res("1", ConfigOp("no.such.key", " 1"), kind="broker")], [Config("broker", "1", "no.such.key", " 1")], {}),
    ("an unknown key on the cluster-wide default too", [], [res("", ConfigOp("no.such.key", "1"), kind="broker")],
     [Config("cluster", "", "no.such.key", "1")], {}),
    ("a dynamic broker key that sets no topic default", [],
     [res("1", ConfigOp("log.cleaner.threads", " 2"), ConfigOp("transaction.partition.verification.enable", "FALSE"),
          kind="broker")],
     [Config("broker", "1", "log.cleaner.threads", "2"),
      Config("broker", "1", "transaction.partition.verification.enable", "false")], {}),
    ("such a key as the cluster-wide default", [], [res("", ConfigOp("num.io.threads", "4"), kind="broker")],
     [Config("cluster", "", "num.io.threads", "4")], {}),
    ("such a key out of Kafka's range", [], [res("1", ConfigOp("log.cleaner.threads", "-1"), kind="broker")], [],
     {0: ("INVALID_CONFIG", "Invalid value '-1' for configuration log.cleaner.threads: out of range")}),
    ("a 4.x topic key's broker synonym", [],
     [res("", ConfigOp("max.decompressed.message.bytes", "2000000"), ConfigOp("log.remote.copy.lag.ms", "-1"),
          kind="broker")],
     [Config("cluster", "", "log.remote.copy.lag.ms", "-1"),
      Config("cluster", "", "max.decompressed.message.bytes", "2000000")], {}),
    ("group configs: the group need not exist", [],
     [res("g", ConfigOp("consumer.session.timeout.ms", "50000"), ConfigOp("consumer.heartbeat.interval.ms", "15000"),
          ConfigOp("share.auto.offset.reset", "by_duration:PT1H"), kind="group")],
     [Config("group", "g", "consumer.heartbeat.interval.ms", "15000"),
      Config("group", "g", "consumer.session.timeout.ms", "50000"),
      Config("group", "g", "share.auto.offset.reset", "by_duration:PT1H")], {}),
    ("a group session timeout below group.consumer.min.session.timeout.ms", [],
     [res("g", ConfigOp("consumer.session.timeout.ms", "44999"), kind="group")], [],
     {0: ("INVALID_CONFIG", "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")}),
    ("a share heartbeat above group.share.max.heartbeat.interval.ms", [],
     [res("g", ConfigOp("share.heartbeat.interval.ms", "15001"), kind="group")], [],
     {0: ("INVALID_CONFIG", "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")}),
    ("streams standby replicas above group.streams.max.standby.replicas", [],
     [res("g", ConfigOp("streams.num.standby.replicas", "3"), kind="group")], [],
     {0: ("INVALID_CONFIG", "streams.num.standby.replicas must be less than or equal to 2")}),
    ("an unknown group key", [], [res("g", ConfigOp("no.such", "1"), kind="group")], [],
     {0: ("INVALID_CONFIG", "Unknown group config name: no.such")}),
    ("a group value of the wrong type", [], [res("g", ConfigOp("consumer.session.timeout.ms", "abc"), kind="group")],
     [], {0: ("INVALID_CONFIG", "configuration consumer.session.timeout.ms: not an integer")}),
    ("deleting a group config", [Config("group", "g", "consumer.session.timeout.ms", "50000")],
     [res("g", ConfigOp("consumer.session.timeout.ms", None, DELETE), kind="group")],
     [Config("group", "g", "consumer.session.timeout.ms", None)], {}),
    ("a bad broker value names the broker key", [], [res("", ConfigOp("log.retention.ms", "x"), kind="broker")], [],
     {0: ("INVALID_CONFIG", "configuration log.retention.ms: not an integer")}),
    ("a broker name that is not an id", [], [res("b1", ConfigOp("log.retention.ms", "1"), kind="broker")], [],
     {0: ("INVALID_CONFIG", "expected a broker id or the empty name")}),
    ("replication throttle rates are dynamic broker configs", [],
     [res("2", ConfigOp("leader.replication.throttled.rate", " 1000 "),
          ConfigOp("follower.replication.throttled.rate", "0"), kind="broker")],
     [Config("broker", "2", "follower.replication.throttled.rate", "0"),
      Config("broker", "2", "leader.replication.throttled.rate", "1000")], {}),
    ("a throttle rate as the cluster-wide default", [],
     [res("", ConfigOp("follower.replication.throttled.rate", "9223372036854775807"), kind="broker")],
     [Config("cluster", "", "follower.replication.throttled.rate", "9223372036854775807")], {}),
    ("a negative throttle rate", [], [res("1", ConfigOp("leader.replication.throttled.rate", "-1"), kind="broker")],
     [], {0: ("INVALID_CONFIG", "leader.replication.throttled.rate: expected a value in [0,")}),
    ("a throttle rate that is not a long", [],
     [res("1", ConfigOp("leader.replication.throttled.rate", "1_000"), kind="broker")],
     [], {0: ("INVALID_CONFIG", "not a number of type LONG")}),
    ("a throttle rate past Long.MAX", [],
     [res("1", ConfigOp("leader.replication.throttled.rate", "9223372036854775808"), kind="broker")],
     [], {0: ("INVALID_CONFIG", "expected a value in [0,")}),
]


@pytest.mark.parametrize(("name", "records", "resources", "expected", "errors"), ALTER_CASES,
                         ids=[c[0] for c in ALTER_CASES])
def test_alter_configs(name, records, resources, expected, errors) -> None:
    image = cluster(*records)
    decision, refused = alter_configs(image, resources, frozenset({"log.dirs"}))
    assert list(decision.records) == expected
    assert {i: e.name for i, e in refused.items()} == {i: n for i, (n, _) in errors.items()}
    for i, (_, text) in errors.items():
        assert text in refused[i].message
    after = commit(image, decision)  # every record applies
    for record in expected:
        stored = after.configs.get((record.resource_type, record.resource_name), {})
        assert stored.get(record.name) == record.value


def test_alter_configs_over_the_per_op_cap_is_refused_whole() -> None:
    image = cluster(*two_replica_topic())
    ops = tuple(ConfigOp("retention.ms", "1") for _ in range(1))
    resources = [res("t", *ops)] + [res(str(b), ConfigOp("log.retention.ms", "1"), kind="broker")
                                    for b in range(cd.MAX_RECORDS_PER_USER_OP)]
    with pytest.raises(ControllerError) as caught:
        alter_configs(image, resources)
    assert caught.value.name == "POLICY_VIOLATION"


@pytest.mark.parametrize(("configs", "rf", "error"), [
    ({"min.insync.replicas": "2"}, 1, "INVALID_CONFIG"),
    ({"min.insync.replicas": "1"}, 1, None),
    ({"min.insync.replicas": "3"}, 3, None),
])
def test_create_topics_min_insync_against_replication_factor(configs, rf, error) -> None:
    image = cluster()
    decision, errors = cd.create_topics(image, [cd.NewTopic("m", 1, rf, configs)], lambda _: "id")
    assert (errors["m"].name if "m" in errors else None) == error
    assert bool(decision.records) == (error is None)


# (name, extra records, assignments, expected (replicas, isr, leader) per partition or error text)
MANUAL_CASES = [
    ("explicit brokers, leader first", [], {0: (3, 1), 1: (2, 3)}, [((3, 1), (3, 1), 3), ((2, 3), (2, 3), 2)]),
    ("a fenced broker stays a replica, out of the ISR", [FenceBroker(1, 1)], {0: (1, 2)}, [((1, 2), (2,), 2)]),
    ("unknown broker", [], {0: (1, 9)}, "includes broker 9, but no such broker is registered"),
    ("duplicate brokers", [], {0: (2, 2)}, "contains duplicate broker ids"),
    ("empty replica list", [], {0: ()}, "the replica list is empty"),
    ("uneven replication", [], {0: (1, 2), 1: (3,)}, "has 1 replica(s); expected 2"),
    ("not 0-based consecutive", [], {1: (1,)}, "consecutive 0-based"),
    ("every replica fenced", [FenceBroker(1, 1)], {0: (1,)}, "are fenced"),
]


@pytest.mark.parametrize(("name", "extra", "assignments", "expected"), MANUAL_CASES, ids=[c[0] for c in MANUAL_CASES])
def test_create_topic_with_manual_assignment(name, extra, assignments, expected) -> None:
    image = cluster(*extra)
    decision, errors = cd.create_topics(image, [cd.NewTopic("m", None, None, {}, assignments)], lambda _: "mid")
    if isinstance(expected, str):
        assert errors["m"].name == "INVALID_REPLICA_ASSIGNMENT" and expected in errors["m"].message
        assert decision.records == ()
        return
    assert not errors
    parts = [r for r in decision.records if isinstance(r, Partition)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == expected
    commit(image, decision)


def test_manual_assignment_with_counts_is_invalid_request() -> None:
    _, errors = cd.create_topics(cluster(), [cd.NewTopic("m", 2, None, {}, {0: (1,)})], lambda _: "mid")
    assert errors["m"].name == "INVALID_REQUEST"


@pytest.mark.parametrize(("assignment", "expected"), [
    ([(3, 1)], [((3, 1), (3, 1), 3)]),
    ([(3, 9)], "no such broker is registered"),
    ([(3,)], "has 1 replica(s); expected 2"),
    ([(3, 1), (1, 2)], "attempted to add 1 additional partition(s), but 2 assignment(s) were given"),
])
def test_create_partitions_with_manual_assignment(assignment, expected) -> None:
    image = cluster(*two_replica_topic())
    decision, errors = cd.create_partitions_batch(image, [("t", 2)], assignments={"t": assignment})
    if isinstance(expected, str):
        assert errors["t"].name == "INVALID_REPLICA_ASSIGNMENT" and expected in errors["t"].message
        return
    assert [(p.partition, p.replicas, p.isr, p.leader) for p in decision.records] == [
        (1 + i, *e) for i, e in enumerate(expected)]
    commit(image, decision)


# --- ElectLeaders -------------------------------------------------------------------------

P, U = cd.PREFERRED_ELECTION, cd.UNCLEAN_ELECTION
# (name, partition records after brokers 1..3, extra records, election type, partitions,
#  expected changes (partition, leader, isr, unclean), expected errors by (topic, partition))
ELECT_CASES = [
    ("preferred: leadership goes back to the first replica", [Partition(T, 0, (1, 2), (1, 2), 2)], [], P,
     [("t", 0)], [(0, 1, None, False)], {("t", 0): None}),
    ("preferred: not needed", [Partition(T, 0, (1, 2), (1, 2), 1)], [], P, [("t", 0)], [],
     {("t", 0): "ELECTION_NOT_NEEDED"}),
    ("preferred: the preferred replica is out of the ISR", [Partition(T, 0, (1, 2), (2,), 2)], [], P,
     [("t", 0)], [], {("t", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}),
    ("preferred: the preferred replica is fenced", [Partition(T, 0, (1, 2), (1, 2), 2)], [FenceBroker(1, 1)], P,
     [("t", 0)], [], {("t", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}),
    ("unknown partition", [Partition(T, 0, (1, 2), (1, 2), 2)], [], P, [("t", 5), ("nope", 0)], [],
     {("t", 5): "UNKNOWN_TOPIC_OR_PARTITION", ("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION"}),
    ("all partitions: the not-needed ones are not reported",
     [Partition(T, 0, (1, 2), (1, 2), 1), Partition(T, 1, (1, 2), (1, 2), 2)], [], P, None,
     [(1, 1, None, False)], {("t", 1): None}),
    ("unclean: a leaderless partition takes a live replica out of the ISR",
     [Partition(T, 0, (1, 2), (1,), 1)], [FenceBroker(1, 1)], U, [("t", 0)], [(0, 2, (2,), True)], {("t", 0): None}),
    ("unclean: a live ISR member is preferred (clean)",
     [Partition(T, 0, (1, 2, 3), (1, 3), 1)], [FenceBroker(1, 1)], U, [("t", 0)], [(0, 3, None, False)],
     {("t", 0): None}),
    ("unclean: not needed while the leader lives", [Partition(T, 0, (1, 2), (1,), 1)], [], U, [("t", 0)], [],
     {("t", 0): "ELECTION_NOT_NEEDED"}),
    ("unclean: no live replica", [Partition(T, 0, (1,), (1,), 1)], [FenceBroker(1, 1)], U, [("t", 0)], [],
     {("t", 0): "ELIGIBLE_LEADERS_NOT_AVAILABLE"}),
]


@pytest.mark.parametrize(("name", "parts", "extra", "kind", "partitions", "changes", "errors"), ELECT_CASES,
                         ids=[c[0] for c in ELECT_CASES])
def test_elect_leaders(name, parts, extra, kind, partitions, changes, errors) -> None:
    from raftka.raft_meta.metadata.records import PartitionChange

    image = cluster(Topic("t", T), *parts)
    if extra:  # fence without the controller's own reassignment, to set the scene exactly
        image = commit(image, cd.Decision(tuple(extra)))
    decision, results = cd.elect_leaders(image, kind, partitions)
    got = [(r.partition, r.leader, r.isr, r.unclean) for r in decision.records if isinstance(r, PartitionChange)]
    assert got == changes
    assert {k: (None if e is None else e.name) for k, e in results.items()} == errors
    assert bool(decision.warnings) == any(c[3] for c in changes)
    after = commit(image, decision)
    for index, leader, _, _ in changes:
        assert after.partition(T, index).leader == leader


def test_elect_leaders_refuses_an_unknown_type() -> None:
    with pytest.raises(ControllerError) as caught:
        cd.elect_leaders(cluster(), 7, None)
    assert caught.value.name == "INVALID_REQUEST"


# --- dynamic broker configs as topic defaults (raft_meta/config/topic_configs.py) ----------------------

@pytest.mark.parametrize(("cluster_wide", "own", "expected"), [
    ({}, {}, {}),
    ({"log.retention.ms": "5"}, {}, {"retention.ms": "5"}),
    ({"log.retention.hours": "2"}, {}, {"retention.ms": "7200000"}),
    ({"log.retention.hours": "2", "log.retention.ms": "9"}, {}, {"retention.ms": "9"}),  # ms wins, as in Kafka
    ({"log.retention.ms": "5"}, {"log.retention.ms": "6"}, {"retention.ms": "6"}),  # the broker's own wins
    ({"min.insync.replicas": "2", "log.cleanup.policy": "compact"}, {},
     {"min.insync.replicas": "2", "cleanup.policy": "compact"}),
])
def test_dynamic_topic_defaults(cluster_wide: dict, own: dict, expected: dict) -> None:
    from raftka.raft_meta.config.topic_configs import dynamic_topic_defaults, topic_overrides

    records = [Config("cluster", "", k, v) for k, v in cluster_wide.items()]
    records += [Config("broker", "1", k, v) for k, v in own.items()]
    records += [Config("broker", "2", "log.retention.ms", "77")]  # another broker's: not ours
    image = cluster(*two_replica_topic([("segment.ms", "3")]), *records)
    assert dynamic_topic_defaults(image, 1) == expected
    assert topic_overrides(image, 1, "t") == {**expected, "segment.ms": "3"}


def test_manual_assignments_over_the_per_op_cap_are_refused_whole() -> None:
    image = cluster(*two_replica_topic())
    huge = {i: (1,) for i in range(cd.MAX_RECORDS_PER_USER_OP)}
    with pytest.raises(ControllerError) as caught:
        cd.create_topics(image, [cd.NewTopic("big", None, None, {}, huge)], lambda _: "bid")
    assert caught.value.name == "POLICY_VIOLATION"
    with pytest.raises(ControllerError) as caught:
        cd.create_partitions_batch(image, [("t", 2 + cd.MAX_RECORDS_PER_USER_OP)],
                                   assignments={"t": [(1, 2)] * (1 + cd.MAX_RECORDS_PER_USER_OP)})
    assert caught.value.name == "POLICY_VIOLATION"


def test_group_config_bounds_are_the_brokers() -> None:
    """The group.*.min/max keys of the controller's server.properties bound group configs."""
    from raftka.raft_meta.config.config_catalogue import group_bounds

    resource = [res("g", ConfigOp("consumer.session.timeout.ms", "6000"), kind="group")]
    _, refused = alter_configs(cluster(), resource)
    assert refused[0].message == "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
    bounds = group_bounds({"group.consumer.min.session.timeout.ms": "6000", "group.consumer.max.heartbeat.interval.ms": "x"})
    decision, refused = alter_configs(cluster(), resource, group_bounds=bounds)
    assert refused == {}
    assert list(decision.records) == [Config("group", "g", "consumer.session.timeout.ms", "6000")]
