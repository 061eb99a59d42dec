"""Data-driven tests of controller decisions: input image + event -> expected records or error."""

from __future__ import annotations

from collections import Counter

import pytest

from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.apply import apply, replay
from raftka.raft_meta.metadata.image import BrokerRegistration, MetadataImage
from raftka.raft_meta.metadata.records import (
    NO_LEADER,
    Config,
    FenceBroker,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
)

L = (("PLAINTEXT", "h", 1),)
T = "tid"


def cluster(*extra, racks=(None, None, None)) -> MetadataImage:
    """Brokers 1..3 registered at offsets 1..3 and unfenced, then `extra` records."""
    records = [RegisterBroker(i + 1, f"inc{i + 1}", L, rack) for i, rack in enumerate(racks)]
    records += [UnfenceBroker(i + 1, i + 1) for i in range(len(racks))]
    records += list(extra)
    image = replay(list(enumerate(records, start=1)))
    assert image.offset == len(records)
    return image


def topic(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, partitions=1):
    return [Topic("t", T)] + [Partition(T, p, replicas, isr, leader) for p in range(partitions)]


def commit(image: MetadataImage, decision: cd.Decision) -> MetadataImage:
    """Apply a decision's records; every one must be accepted."""
    for record in decision.records:
        image, delta = apply(image, record, image.offset + 1)
        assert delta.accepted, (record, delta.reason)
    return image


# (name, image, decide(image), expected records)
CASES = [
    (
        "fence leader: leadership moves to next ISR member, ISR shrinks",
        cluster(*topic()),
        lambda img: cd.fence_broker(img, 1, False),
        [FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=2, isr=(2, 3))],
    ),
    (
        "fence follower: only ISR shrinks",
        cluster(*topic()),
        lambda img: cd.fence_broker(img, 3, False),
        [FenceBroker(3, 3), PartitionChange(T, 0, 0, isr=(1, 2))],
    ),
    (
        "fence last ISR member: no leader, ISR keeps it",
        cluster(*topic(isr=(1,))),
        lambda img: cd.fence_broker(img, 1, False),
        [FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=NO_LEADER)],
    ),
    (
        "fence last ISR member with unclean election allowed broker-wide",
        cluster(*topic(isr=(1,))),
        lambda img: cd.fence_broker(img, 1, True),
        [FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=2, isr=(2,), unclean=True)],
    ),
    (
        "topic config disables unclean election even if broker default allows",
        cluster(*topic(isr=(1,)), Config("topic", "t", cd.UNCLEAN_KEY, "false")),
        lambda img: cd.fence_broker(img, 1, True),
        [FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=NO_LEADER)],
    ),
    (
        "topic config enables unclean election",
        cluster(*topic(isr=(1,)), Config("topic", "t", cd.UNCLEAN_KEY, "true")),
        lambda img: cd.fence_broker(img, 1, False),
        [FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=2, isr=(2,), unclean=True)],
    ),
    (
        "heartbeat of caught-up fenced broker unfences it and it leads its leaderless partition",
        cluster(*topic(isr=(1,)), FenceBroker(1, 1), PartitionChange(T, 0, 0, leader=NO_LEADER)),
        lambda img: cd.broker_heartbeat(img, 1, 1, caught_up=True, unclean_default=False),
        [UnfenceBroker(1, 1), PartitionChange(T, 0, 1, leader=1)],
    ),
    (
        "heartbeat of a fenced broker that has not caught up: nothing",
        cluster(*topic(), FenceBroker(2, 2)),
        lambda img: cd.broker_heartbeat(img, 2, 2, caught_up=False, unclean_default=False),
        [],
    ),
    (
        "controlled shutdown moves leaderships first, then fences",
        cluster(*topic(partitions=2)),
        lambda img: cd.controlled_shutdown(img, 1, 1, False),
        [PartitionChange(T, 0, 0, leader=2, isr=(2, 3)), PartitionChange(T, 1, 0, leader=2, isr=(2, 3)), FenceBroker(1, 1)],
    ),
    (
        "controlled shutdown of a follower: it leaves every ISR at once, leaderships stay, then it is fenced",
        cluster(*topic(partitions=2)),
        lambda img: cd.controlled_shutdown(img, 3, 3, False),
        [PartitionChange(T, 0, 0, isr=(1, 2)), PartitionChange(T, 1, 0, isr=(1, 2)), FenceBroker(3, 3)],
    ),
    (
        "controlled shutdown of a broker outside the ISR: only the fence (ineligible from then on)",
        cluster(*topic(isr=(1, 2))),
        lambda img: cd.controlled_shutdown(img, 3, 3, False),
        [FenceBroker(3, 3)],
    ),
    (
        "controlled shutdown asked again (the broker retries until it may stop): nothing more to do",
        cluster(*topic(), PartitionChange(T, 0, 0, isr=(1, 2)), FenceBroker(3, 3)),
        lambda img: cd.controlled_shutdown(img, 3, 3, False),
        [],
    ),
    (
        "a probe proved the process gone: fenced and out of every ISR in the same entry",
        cluster(*topic(partitions=2)),
        lambda img: cd.fence_gone_broker(img, 3, 3, False),
        [FenceBroker(3, 3), PartitionChange(T, 0, 0, isr=(1, 2)), PartitionChange(T, 1, 0, isr=(1, 2))],
    ),
    (
        "a probe of a previous incarnation does not fence the restarted broker",
        cluster(*topic(isr=(1, 2)), FenceBroker(3, 3), RegisterBroker(3, "inc3b", L, None)),
        lambda img: cd.fence_gone_broker(img, 3, 3, False),
        [],
    ),
    (
        "a restarted broker that caught up is unfenced; it rejoins the ISR through its leader",
        cluster(*topic(isr=(1, 2)), FenceBroker(3, 3), RegisterBroker(3, "inc3b", L, None)),
        lambda img: cd.broker_heartbeat(img, 3, 10, caught_up=True, unclean_default=False),
        [UnfenceBroker(3, 10)],
    ),
    (
        "alter partition shrink",
        cluster(*topic()),
        lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (1, 2)),
        [PartitionChange(T, 0, 0, isr=(1, 2))],
    ),
    (
        "alter partition unchanged ISR is a no-op",
        cluster(*topic()),
        lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (1, 2, 3)),
        [],
    ),
    (
        "preferred leader election",
        cluster(*topic(), PartitionChange(T, 0, 0, leader=2)),
        cd.preferred_leader_elections,
        [PartitionChange(T, 0, 1, leader=1)],
    ),
    (
        "preferred leader not in ISR: no change",
        cluster(*topic(), PartitionChange(T, 0, 0, leader=2, isr=(2, 3))),
        cd.preferred_leader_elections,
        [],
    ),
    (
        "producer ids come in contiguous blocks",
        cluster(ProducerIds(2, 2, 0, 1000)),
        lambda img: cd.allocate_producer_ids(img, 1, 1),
        [ProducerIds(1, 1, 1000, 1000)],
    ),
    (
        "delete topic",
        cluster(*topic()),
        lambda img: cd.delete_topic(img, "t", request_id="r"),
        [RemoveTopic(T, request_id="r")],
    ),
    (
        "create topic places leaders round robin",
        cluster(),
        lambda img: cd.create_topic(img, "new", 3, 2, "nid"),
        [Topic("new", "nid"), Partition("nid", 0, (1, 2), (1, 2), 1), Partition("nid", 1, (2, 3), (2, 3), 2),
         Partition("nid", 2, (3, 1), (3, 1), 3)],
    ),
    (
        "register a new incarnation after the old one's session ended",
        cluster(),
        lambda img: cd.register_broker(img, 2, "inc2b", L, None, session_alive=False),
        [RegisterBroker(2, "inc2b", L, None)],
    ),
    (
        # A kill -9 and a restart faster than the death was noticed: the leader's partitions move
        # and it leaves the ISRs before the new incarnation registers (its leader epoch is gone).
        "a restarted incarnation's leaderships and ISR places move before it registers",
        cluster(*topic(partitions=2), PartitionChange(T, 1, 0, leader=2)),
        lambda img: cd.register_broker(img, 1, "inc1b", L, None, session_alive=False),
        [PartitionChange(T, 0, 0, leader=2, isr=(2, 3)), PartitionChange(T, 1, 1, isr=(2, 3)),
         RegisterBroker(1, "inc1b", L, None)],
    ),
    (
        "the same incarnation registering again (a retried request) moves nothing",
        cluster(*topic()),
        lambda img: cd.register_broker(img, 1, "inc1", L, None, session_alive=True),
        [RegisterBroker(1, "inc1", L, None)],
    ),
    (
        "a restarted sole replica stays the last ISR member (only clean candidate), leaderless",
        cluster(*topic(replicas=(1,), isr=(1,))),
        lambda img: cd.register_broker(img, 1, "inc1b", L, None, session_alive=False),
        [PartitionChange(T, 0, 0, leader=-1), RegisterBroker(1, "inc1b", L, None)],
    ),
]


@pytest.mark.parametrize(("name", "image", "decide", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decision(name, image, decide, expected) -> None:
    decision = decide(image)
    assert list(decision.records) == expected
    commit(image, decision)  # decisions made on the current image always apply


# (name, image, decide(image), error name)
ERRORS = [
    ("RF larger than live brokers", cluster(), lambda img: cd.create_topic(img, "x", 1, 4, "id"), "INVALID_REPLICATION_FACTOR"),
    ("RF counts only unfenced brokers", cluster(FenceBroker(3, 3)), lambda img: cd.create_topic(img, "x", 1, 3, "id"),
     "INVALID_REPLICATION_FACTOR"),
    ("topic exists", cluster(*topic()), lambda img: cd.create_topic(img, "t", 1, 1, "id"), "TOPIC_ALREADY_EXISTS"),
    ("bad topic name", cluster(), lambda img: cd.create_topic(img, "a/b", 1, 1, "id"), "INVALID_TOPIC_EXCEPTION"),
    ("zero partitions", cluster(), lambda img: cd.create_topic(img, "x", 0, 1, "id"), "INVALID_PARTITIONS"),
    # Kafka's MAX_RECORDS_PER_USER_OP (10 000): refused before any placement (found by the fuzzer:
    # 2^31-1 partitions took the broker to 21 GB)
    ("too many partitions", cluster(), lambda img: cd.create_topic(img, "x", 2**31 - 1, 1, "id"), "POLICY_VIOLATION"),
    ("one record too many", cluster(), lambda img: cd.create_topic(img, "x", 10_000, 1, "id"), "POLICY_VIOLATION"),
    ("grow to too many partitions", cluster(*topic()), lambda img: cd.create_partitions(img, "t", 1_782_741_552),
     "POLICY_VIOLATION"),
    ("alter partition stale leader epoch", cluster(*topic()),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 5, 0, (1,)), "FENCED_LEADER_EPOCH"),
    ("alter partition stale partition epoch", cluster(*topic(), PartitionChange(T, 0, 0, isr=(1, 2))),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (1,)), "INVALID_UPDATE_VERSION"),
    ("alter partition from a non-leader", cluster(*topic()),
     lambda img: cd.alter_partition(img, 2, 2, T, 0, 0, 0, (2,)), "NOT_LEADER_OR_FOLLOWER"),
    ("alter partition with stale broker epoch", cluster(*topic()),
     lambda img: cd.alter_partition(img, 1, 99, T, 0, 0, 0, (1,)), "STALE_BROKER_EPOCH"),
    ("alter partition adding a fenced replica", cluster(*topic(isr=(1, 2)), FenceBroker(3, 3)),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (1, 2, 3)), "INELIGIBLE_REPLICA"),
    ("alter partition re-adding a broker that shut down", cluster(*topic(), PartitionChange(T, 0, 0, isr=(1, 2)),
                                                                 FenceBroker(3, 3)),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 1, (1, 2, 3)), "INELIGIBLE_REPLICA"),
    ("alter partition adding a broker, sent before its controlled shutdown took it out: superseded",
     cluster(*topic(isr=(1, 2, 3)), PartitionChange(T, 0, 0, isr=(1, 2)), PartitionChange(T, 0, 1, isr=(1, 2, 3)),
             PartitionChange(T, 0, 2, isr=(1, 2)), FenceBroker(3, 3)),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 2, (1, 2, 3)), "INVALID_UPDATE_VERSION"),
    ("alter partition adding a restarted broker that is not unfenced yet",
     cluster(*topic(isr=(1, 2)), FenceBroker(3, 3), RegisterBroker(3, "inc3b", L, None)),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (1, 2, 3)), "INELIGIBLE_REPLICA"),
    ("alter partition dropping the leader", cluster(*topic()),
     lambda img: cd.alter_partition(img, 1, 1, T, 0, 0, 0, (2, 3)), "INVALID_REQUEST"),
    ("heartbeat with stale broker epoch", cluster(), lambda img: cd.broker_heartbeat(img, 1, 7, True, False),
     "STALE_BROKER_EPOCH"),
    ("heartbeat from unregistered broker", cluster(), lambda img: cd.broker_heartbeat(img, 9, 1, True, False),
     "BROKER_ID_NOT_REGISTERED"),
    ("duplicate live registration", cluster(),
     lambda img: cd.register_broker(img, 2, "other", L, None, session_alive=True), "DUPLICATE_BROKER_REGISTRATION"),
    ("grow partitions of unknown topic", cluster(), lambda img: cd.create_partitions(img, "x", 3), "UNKNOWN_TOPIC_OR_PARTITION"),
    ("a topic over the records cap (1 Topic + 10 000 Partition records)", cluster(),
     lambda img: cd.create_topic(img, "x", cd.MAX_RECORDS_PER_USER_OP, 1, "id"), "POLICY_VIOLATION"),
    ("100 000 partitions", cluster(), lambda img: cd.create_topic(img, "x", 100_000, 3, "id"), "POLICY_VIOLATION"),
    ("grow a topic to 1 000 000 partitions", cluster(*topic()),
     lambda img: cd.create_partitions(img, "t", 1_000_000), "POLICY_VIOLATION"),
]


@pytest.mark.parametrize(("name", "image", "decide", "error"), ERRORS, ids=[c[0] for c in ERRORS])
def test_decision_error(name, image, decide, error) -> None:
    with pytest.raises(ControllerError) as info:
        decide(image)
    assert info.value.name == error and info.value.code > 0


def test_unclean_election_is_reported_as_possible_data_loss() -> None:
    decision = cd.fence_broker(cluster(*topic(isr=(1,))), 1, True)
    assert decision.warnings[0][0] == "partition.unclean_leader_elected"
    assert decision.warnings[0][1]["possible_data_loss"] is True


def test_stale_decision_is_rejected_by_apply() -> None:
    """Two decisions made on the same image: the second is rejected deterministically."""
    image = cluster(*topic())
    first = cd.alter_partition(image, 1, 1, T, 0, 0, 0, (1, 2))
    second = cd.alter_partition(image, 1, 1, T, 0, 0, 0, (1, 3))
    image = commit(image, first)
    image, delta = apply(image, second.records[0], image.offset + 1)
    assert not delta.accepted and "partition epoch" in delta.reason
    assert image.partition(T, 0).isr == (1, 2)


def test_expired_brokers() -> None:
    image = cluster(FenceBroker(3, 3))
    assert cd.expired_brokers(image, {1: 100.0, 2: 95.0}, now=104.0, session_timeout_ms=9000) == []
    assert cd.expired_brokers(image, {1: 100.0, 2: 94.0}, now=104.0, session_timeout_ms=9000) == [2]
    assert cd.expired_brokers(image, {}, now=0.0, session_timeout_ms=9000) == [1, 2]


def _brokers(n: int, racks: int = 0) -> list[BrokerRegistration]:
    return [BrokerRegistration(i, "x", i, L, f"r{i % racks}" if racks else None, False) for i in range(1, n + 1)]


@pytest.mark.parametrize(("n", "partitions", "rf"), [(3, 3, 3), (3, 30, 2), (5, 50, 3), (4, 8, 1), (1, 4, 1)])
def test_placement_spreads_leaders_and_replicas_evenly(n: int, partitions: int, rf: int) -> None:
    assignment = cd.place_replicas(_brokers(n), partitions, rf, start=1)
    assert all(len(set(r)) == rf for r in assignment)
    leaders = Counter(r[0] for r in assignment)
    replicas = Counter(b for r in assignment for b in r)
    assert max(leaders.values()) - min(leaders.values()) <= 1 and len(leaders) == min(n, partitions)
    assert max(replicas.values()) - min(replicas.values()) <= 1


def test_placement_is_rack_aware() -> None:
    brokers = _brokers(6, racks=3)  # racks r1: 1,4  r2: 2,5  r0: 3,6
    rack_of = {b.broker_id: b.rack for b in brokers}
    for replicas in cd.place_replicas(brokers, 12, 3, start=0):
        assert len({rack_of[b] for b in replicas}) == 3, replicas


def test_create_partitions_continues_placement() -> None:
    image = cluster(*topic())
    decision = cd.create_partitions(image, "t", 3)
    assert [r.partition for r in decision.records] == [1, 2]
    assert all(len(r.replicas) == 3 for r in decision.records)
    image = commit(image, decision)
    assert len(image.topic_by_name("t").partitions) == 3


# --- one user operation: the records of a whole request count against MAX_RECORDS_PER_USER_OP ---

CAP = cd.MAX_RECORDS_PER_USER_OP


def _topics(*partitions: int | None, prefix: str = "n") -> list[cd.NewTopic]:
    return [cd.NewTopic(f"{prefix}{i}", p, 1) for i, p in enumerate(partitions)]


# (name, image, topics, expected: record count or the error of the whole request)
CREATE_TOPICS = [
    ("one topic exactly at the cap", cluster(), _topics(CAP - 1), CAP),
    ("one topic one record over", cluster(), _topics(CAP), "POLICY_VIOLATION"),
    ("two topics together over the cap, each under it", cluster(), _topics(CAP // 2, CAP // 2), "POLICY_VIOLATION"),
    ("many small topics together at the cap", cluster(), _topics(*[1] * (CAP // 2)), CAP),
    ("auto-creation of 10 000 one-partition topics", cluster(), _topics(*[None] * 10_000), "POLICY_VIOLATION"),
    ("a topic refused for another reason writes nothing and does not count", cluster(*topic()),
     [cd.NewTopic("t", 10 * CAP, 1), cd.NewTopic("u", CAP - 1, 1)], CAP),
]


@pytest.mark.parametrize(("name", "image", "topics", "expected"), CREATE_TOPICS, ids=[c[0] for c in CREATE_TOPICS])
def test_create_topics_counts_the_records_of_the_whole_request(name, image, topics, expected, monkeypatch) -> None:
    def ids(i: int) -> str:
        return f"id{i}"

    if isinstance(expected, int):
        decision, _ = cd.create_topics(image, topics, ids)
        assert len(decision.records) == expected
        return
    # Refused before any replica is placed: a request for millions of partitions costs nothing.
    monkeypatch.setattr(cd, "place_replicas", lambda *a, **k: pytest.fail("placement ran before the cap check"))
    with pytest.raises(ControllerError) as info:
        cd.create_topics(image, topics, ids)
    assert info.value.name == expected
    assert "MAX_RECORDS_PER_USER_OP" in info.value.message and str(CAP) in info.value.message


def test_create_topics_answers_each_topic_and_places_the_rest() -> None:
    image = cluster(*topic())
    asked = [cd.NewTopic("t", 1, 1), cd.NewTopic("a/b", 1, 1), cd.NewTopic("d", 1, 1), cd.NewTopic("d", 2, 1),
             cd.NewTopic("rf", 1, 4), cd.NewTopic("ok", 2, 2, {"retention.ms": "5"}), cd.NewTopic("dflt")]
    decision, errors = cd.create_topics(image, asked, lambda i: f"id{i}",
                                        default_partitions=3, default_replication_factor=1, start=1)
    assert {name: e.name for name, e in errors.items()} == {
        "t": "TOPIC_ALREADY_EXISTS", "a/b": "INVALID_TOPIC_EXCEPTION", "d": "INVALID_REQUEST",
        "rf": "INVALID_REPLICATION_FACTOR"}
    assert "1 partitions, replication factor 3" in errors["t"].message  # the layout that exists
    topics = [r for r in decision.records if isinstance(r, Topic)]
    assert [(t.name, t.topic_id, t.configs) for t in topics] == [("ok", "id5", (("retention.ms", "5"),)), ("dflt", "id6", ())]
    image = commit(image, decision)
    assert len(image.topic_by_name("ok").partitions) == 2 and len(image.topic_by_name("dflt").partitions) == 3


# (name, image, (topic, total) pairs, expected: record count or the error of the whole request)
CREATE_PARTITIONS = [
    ("grow to exactly the cap", cluster(*topic()), [("t", CAP + 1)], CAP),
    ("one over", cluster(*topic()), [("t", CAP + 2)], "POLICY_VIOLATION"),
    ("two topics together over the cap", cluster(*topic(), Topic("u", "U"), Partition("U", 0, (1,), (1,), 1)),
     [("t", CAP // 2 + 1), ("u", CAP // 2 + 2)], "POLICY_VIOLATION"),
]


@pytest.mark.parametrize(("name", "image", "totals", "expected"), CREATE_PARTITIONS, ids=[c[0] for c in CREATE_PARTITIONS])
def test_create_partitions_counts_the_records_of_the_whole_request(name, image, totals, expected, monkeypatch) -> None:
    if isinstance(expected, int):
        decision, errors = cd.create_partitions_batch(image, totals)
        assert not errors and len(decision.records) == expected
        return
    monkeypatch.setattr(cd, "place_replicas", lambda *a, **k: pytest.fail("placement ran before the cap check"))
    with pytest.raises(ControllerError) as info:
        cd.create_partitions_batch(image, totals)
    assert info.value.name == expected and "MAX_RECORDS_PER_USER_OP" in info.value.message


def test_create_partitions_answers_each_topic() -> None:
    decision, errors = cd.create_partitions_batch(cluster(*topic()), [("t", 3), ("x", 2), ("t", 4)])
    assert {n: e.name for n, e in errors.items()} == {"t": "INVALID_REQUEST", "x": "UNKNOWN_TOPIC_OR_PARTITION"}
    assert decision.records == ()
