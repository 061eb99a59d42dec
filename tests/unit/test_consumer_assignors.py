"""The KIP-848 server-side assignors (broker/group/consumer_assignors.py): every subscribed
partition assigned exactly once, to a subscriber; uniform balanced and sticky."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.broker.group.consumer_assignors import (
    ASSIGNORS,
    TopicMeta,
    range_assign,
    uniform_assign,
)

TOPICS = {name: TopicMeta(f"id-{name}", name, n) for name, n in (("a", 5), ("b", 3), ("c", 8))}

subscriptions = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(7)]),
    st.sets(st.sampled_from(sorted(TOPICS)), min_size=1).map(lambda s: tuple(sorted(s))),
    min_size=1)


def _check_valid(members, plan) -> None:
    assert set(plan) == set(members)
    seen = set()
    by_id = {t.topic_id: t for t in TOPICS.values()}
    for member, topics in plan.items():
        for topic_id, partitions in topics.items():
            assert by_id[topic_id].name in members[member]
            for p in partitions:
                assert (topic_id, p) not in seen
                seen.add((topic_id, p))
    wanted = {(TOPICS[n].topic_id, p) for subs in members.values() for n in subs for p in range(TOPICS[n].partitions)}
    assert seen == wanted


def _load(plan) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in plan.items()}


@settings(max_examples=200, deadline=None)
@given(subscriptions, subscriptions)
def test_every_partition_once_to_a_subscriber(before, after) -> None:
    for assign in ASSIGNORS.values():
        previous = assign(before, TOPICS, {})
        _check_valid(before, previous)
        _check_valid(after, assign(after, TOPICS, previous))


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from([f"m{i}" for i in range(7)]), min_size=1), st.sampled_from([f"x{i}" for i in range(3)]))
def test_uniform_identical_subscriptions_balanced_and_sticky(members, newcomer) -> None:
    subs = dict.fromkeys(sorted(members), ("a", "b", "c"))
    plan = uniform_assign(subs, TOPICS, {})
    loads = _load(plan).values()
    assert max(loads) - min(loads) <= 1
    grown = uniform_assign({**subs, newcomer: ("a", "b", "c")}, TOPICS, plan)
    loads = _load(grown).values()
    assert max(loads) - min(loads) <= 1
    # Sticky: only what the newcomer gets moves.
    moved = sum(len(ps - grown[m].get(t, frozenset())) for m, topics in plan.items() for t, ps in topics.items())
    assert moved == _load(grown)[newcomer]


def test_uniform_balances_through_a_chain() -> None:
    subs = {"a": ("a", "b"), "b": ("a", "b"), "d": ("b",)}
    topics = {"a": TopicMeta("A", "a", 3), "b": TopicMeta("B", "b", 3)}
    assert sorted(_load(uniform_assign(subs, topics, {})).values()) == [2, 2, 2]


def test_range_contiguous_sorted_by_member_id() -> None:
    plan = range_assign({"y": ("c",), "x": ("c",), "z": ("c",)}, TOPICS, {})
    assert plan == {"x": {"id-c": frozenset({0, 1, 2})}, "y": {"id-c": frozenset({3, 4, 5})},
                    "z": {"id-c": frozenset({6, 7})}}
