"""The cooperative-sticky assignor: stickiness, balance, and moving only what must move."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.client.assignors import assignor, is_cooperative
from raftka.client.group_protocol import Subscription, decode_subscription, encode_subscription
from raftka.client.records import TopicPartition
from raftka.client.sticky_assignor import cooperative_sticky_assign, current_owners, sticky_assign


def tps(topic: str, *partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, p) for p in partitions)


def member(*topics: str, owned: tuple[TopicPartition, ...] = (), generation: int = 1) -> Subscription:
    return Subscription(tuple(topics), None, owned, generation if owned else -1)


def loads(plan) -> list[int]:
    return sorted(len(v) for v in plan.values())


def test_registered_under_kafkas_name_and_cooperative():
    assert assignor("cooperative-sticky") is cooperative_sticky_assign
    assert is_cooperative(["cooperative-sticky"])
    assert not is_cooperative(["cooperative-sticky", "range"])  # Kafka: eager unless all are cooperative
    assert not is_cooperative([])


def test_fresh_assignment_is_balanced():
    plan = cooperative_sticky_assign({m: member("t") for m in "abc"}, {"t": 7})
    assert loads(plan) == [2, 2, 3]
    assert sorted(tp for v in plan.values() for tp in v) == list(tps("t", *range(7)))


def test_a_new_member_takes_only_the_excess_and_only_in_the_second_round():
    subs = {"a": member("t", owned=tps("t", 0, 1, 2)), "b": member("t", owned=tps("t", 3, 4, 5)),
            "c": member("t")}
    plan = sticky_assign(subs, {"t": 6})
    assert loads(plan) == [2, 2, 2]
    assert set(plan["a"]) < set(tps("t", 0, 1, 2)) and set(plan["b"]) < set(tps("t", 3, 4, 5))
    # Cooperative round 1: the two moving partitions are withheld from c; a and b keep the rest.
    round1 = cooperative_sticky_assign(subs, {"t": 6})
    assert round1["a"] == plan["a"] and round1["b"] == plan["b"] and round1["c"] == []
    # a and b revoke what they lost and rejoin; round 2 hands it to c.
    subs2 = {"a": member("t", owned=tuple(round1["a"]), generation=2),
             "b": member("t", owned=tuple(round1["b"]), generation=2),
             "c": member("t", owned=(), generation=2)}
    round2 = cooperative_sticky_assign(subs2, {"t": 6})
    assert round2["a"] == round1["a"] and round2["b"] == round1["b"] and loads(round2) == [2, 2, 2]


def test_a_departed_members_partitions_spread_and_nobody_else_moves():
    subs = {"a": member("t", owned=tps("t", 0, 1)), "b": member("t", owned=tps("t", 2, 3))}
    plan = cooperative_sticky_assign(subs, {"t": 6})  # c (who owned 4, 5) is gone
    assert set(tps("t", 0, 1)) <= set(plan["a"]) and set(tps("t", 2, 3)) <= set(plan["b"])
    assert loads(plan) == [3, 3]


def test_unsubscribed_topic_is_revoked_first_then_moves():
    subs = {"a": member("t", owned=tps("t", 0, 1) + tps("u", 0)), "b": member("t", "u", owned=tps("t", 2))}
    round1 = cooperative_sticky_assign(subs, {"t": 3, "u": 1})
    assert TopicPartition("u", 0) not in round1["a"], "a no longer subscribes to u"
    assert TopicPartition("u", 0) not in round1["b"], "a still consumes u-0 until it revoked it"
    subs2 = {"a": member("t", owned=tuple(round1["a"]), generation=2),
             "b": member("t", "u", owned=tuple(round1["b"]), generation=2)}
    assert TopicPartition("u", 0) in cooperative_sticky_assign(subs2, {"t": 3, "u": 1})["b"]


def test_conflicting_claims_go_to_the_newest_generation_and_ties_to_nobody():
    subs = {"a": member("t", owned=tps("t", 0, 1), generation=3),
            "b": member("t", owned=tps("t", 0), generation=5),
            "c": member("t", owned=tps("t", 1), generation=3)}
    owners = current_owners(subs)
    assert owners[TopicPartition("t", 0)] == "b"
    assert TopicPartition("t", 1) not in owners  # a and c both claim it in generation 3


def test_heterogeneous_subscriptions_only_get_their_topics():
    subs = {"a": member("t"), "b": member("t", "u"), "c": member("u")}
    plan = cooperative_sticky_assign(subs, {"t": 4, "u": 2})
    assert all(tp.topic == "t" for tp in plan["a"]) and all(tp.topic == "u" for tp in plan["c"])
    assert sorted(tp for v in plan.values() for tp in v) == list(tps("t", 0, 1, 2, 3) + tps("u", 0, 1))
    assert loads(plan) == [2, 2, 2]


def test_subscription_v2_round_trips_owned_partitions_and_generation():
    sub = Subscription(("t",), None, tps("t", 1, 3), 9)
    assert decode_subscription(encode_subscription(sub, version=2)) == sub
    v3 = Subscription(("t",), b"u", tps("t", 0), 4, "rack-1")
    assert decode_subscription(encode_subscription(v3, version=3)) == v3
    # A v0 reader's view of the same member: topics only.
    assert decode_subscription(encode_subscription(sub, version=0)) == Subscription(("t",))


# --- properties ---------------------------------------------------------------------

@st.composite
def groups(draw):
    topics = {t: draw(st.integers(0, 8)) for t in draw(st.sets(st.sampled_from("tuvw"), min_size=1, max_size=3))}
    names = sorted(draw(st.sets(st.sampled_from("abcdefg"), min_size=1, max_size=6)))
    uniform = draw(st.booleans())
    every = [TopicPartition(t, p) for t, n in topics.items() for p in range(n + 2)]  # some vanished
    subs = {}
    for name in names:
        subscribed = tuple(sorted(topics)) if uniform else tuple(sorted(
            draw(st.sets(st.sampled_from(sorted(topics)), min_size=1))))
        owned = tuple(draw(st.sets(st.sampled_from(every), max_size=6))) if every else ()
        subs[name] = Subscription(subscribed, None, owned, draw(st.integers(1, 3)))
    return subs, topics, uniform


@settings(max_examples=300, deadline=None)
@given(groups())
def test_assignments_are_valid_sticky_balanced_and_cooperative(case):
    subs, counts, uniform = case
    plan = sticky_assign(subs, counts)
    owners = current_owners(subs)
    given = [tp for v in plan.values() for tp in v]
    assert len(given) == len(set(given)), "a partition assigned twice"
    for m, assigned in plan.items():
        assert all(tp.topic in subs[m].topics and tp.partition < counts[tp.topic] for tp in assigned)
    wanted = {TopicPartition(t, p) for s in subs.values() for t in s.topics for p in range(counts[t])}
    assert set(given) == wanted, "every subscribed partition is assigned"
    if uniform:
        sizes = loads(plan)
        assert sizes[-1] - sizes[0] <= 1, f"unbalanced: {sizes}"
        share = len(wanted) // len(subs)
        for m, s in subs.items():
            valid = {tp for tp in s.owned_partitions if owners.get(tp) == m and tp in wanted}
            if len(valid) <= share:
                assert valid <= set(plan[m]), f"{m} lost owned partitions while at or under its share"
    coop = cooperative_sticky_assign(subs, counts)
    for m, assigned in coop.items():
        assert set(assigned) <= set(plan[m])
        for tp in assigned:
            assert owners.get(tp, m) == m, f"{tp} handed from {owners.get(tp)} to {m} in one round"


@settings(max_examples=200, deadline=None)
@given(groups())
def test_cooperative_rounds_settle_on_the_sticky_plan(case):
    """Members revoke what round N withheld and rejoin; round N+1 hands it over; it settles."""
    subs, counts, _ = case
    generation = 10
    for _ in range(4):
        plan = cooperative_sticky_assign(subs, counts)
        if all(set(plan[m]) == set(s.owned_partitions) for m, s in subs.items()):
            break
        generation += 1
        subs = {m: Subscription(s.topics, None, tuple(plan[m]), generation) for m, s in subs.items()}
    else:
        raise AssertionError(f"no stable assignment after 4 rounds: {plan}")
    assert plan == sticky_assign(subs, counts)
