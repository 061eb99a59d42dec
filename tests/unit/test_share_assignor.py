"""Table and property tests for broker/group/share_assignor.py (Kafka's SimpleAssignor rules), and its
shapes and stickiness against Kafka 4.4's own SimpleAssignor."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from raftka.broker.group.share_assignor import assign


def _subs(members: int, topics: tuple[str, ...]) -> dict[str, frozenset[str]]:
    return {f"m{i}": frozenset(topics) for i in range(members)}


@pytest.mark.parametrize(("members", "partitions", "expected"), [
    # every member reads the single partition
    (3, 1, {"m0": {0}, "m1": {0}, "m2": {0}}),
    # 2 members, 5 partitions: split 3 + 2, handed out round-robin
    (2, 5, {"m0": {0, 2, 4}, "m1": {1, 3}}),
    # 3 members, 2 partitions: each partition twice, 4 assignments over 3 members
    (3, 2, {"m0": {0, 1}, "m1": {0}, "m2": {1}}),
    (1, 0, {"m0": set()}),
])
def test_fresh_assignment(members: int, partitions: int, expected: dict) -> None:
    got = assign(_subs(members, ("t",)), {"t": partitions}, {})
    assert {m: {p for _, p in tps} for m, tps in got.items()} == expected


def test_unknown_topics_and_no_members() -> None:
    assert assign({"m0": frozenset({"gone"})}, {"t": 2}, {}) == {"m0": frozenset()}
    assert assign({}, {"t": 2}, {}) == {}


def test_sticky_when_a_member_joins() -> None:
    current = {"m0": frozenset({("t", 0), ("t", 1), ("t", 2), ("t", 3)})}
    got = assign(_subs(2, ("t",)), {"t": 4}, current)
    assert got["m0"] == {("t", 0), ("t", 1)}  # keeps its quota of what it had
    assert got["m1"] == {("t", 2), ("t", 3)}


def test_sticky_when_a_member_leaves() -> None:
    current = {"m0": frozenset({("t", 0), ("t", 1)}), "m1": frozenset({("t", 2), ("t", 3)}),
               "m2": frozenset({("t", 4), ("t", 5)})}
    subs = {m: frozenset({"t"}) for m in ("m0", "m2")}
    got = assign(subs, {"t": 6}, current)
    assert current["m0"] <= got["m0"] and current["m2"] <= got["m2"]
    assert len(got["m0"]) == len(got["m2"]) == 3


def test_heterogeneous_is_balanced_topic_by_topic() -> None:
    subs = {"a": frozenset({"t1"}), "b": frozenset({"t2"}), "c": frozenset({"t1", "t2"})}
    got = assign(subs, {"t1": 2, "t2": 2}, {})
    assert got["a"] == {("t1", 0)} and got["c"] == {("t1", 1), ("t2", 1)} and got["b"] == {("t2", 0)}


@pytest.mark.parametrize(("members", "partitions"), list(itertools.product(range(1, 8), range(1, 9))))
def test_invariants(members: int, partitions: int) -> None:
    """Every partition is read; sharing is ceil(M/P) (never more); members differ by at most one
    assignment; and re-running on its own output changes nothing (stable)."""
    subs = _subs(members, ("t",))
    got = assign(subs, {"t": partitions}, {})
    sharing = -(-members // partitions)
    holders = {p: sum(("t", p) in tps for tps in got.values()) for p in range(partitions)}
    assert all(1 <= h <= sharing for h in holders.values()), holders
    sizes = [len(tps) for tps in got.values()]
    assert max(sizes) - min(sizes) <= 1, sizes
    assert assign(subs, {"t": partitions}, got) == got


# Kafka 4.4's SimpleAssignor on the same inputs (testdata/share_assignor/KafkaSimpleAssignor.java
# wrote kafka_4_4.json): member ids and hash order differ, so the shapes are compared, and how
# much of the previous assignment is kept.
KAFKA = json.loads((Path(__file__).parent / "testdata" / "share_assignor" / "kafka_4_4.json").read_text())
STEPS = [[f"m{i}" for i in range(m)] for m in range(1, 8)] + [[f"m{i}" for i in range(j, 7)] for j in range(1, 7)]


def _shape(got: dict, partitions: int) -> list:
    return [sorted(len(tps) for tps in got.values()),
            sorted(sum(("t", p) in tps for tps in got.values()) for p in range(partitions))]


@pytest.mark.parametrize("key", sorted(KAFKA["fresh"]))
def test_fresh_shape_as_kafka(key: str) -> None:
    members, partitions = map(int, key.split(","))
    assert _shape(assign(_subs(members, ("t",)), {"t": partitions}, {}), partitions) == KAFKA["fresh"][key]


@pytest.mark.parametrize("partitions", sorted(KAFKA["steps"], key=int))
def test_joins_and_leaves_keep_as_much_as_kafka(partitions: str) -> None:
    p = int(partitions)
    previous: dict = {}
    for ids, (per_member, holders, kept) in zip(STEPS, KAFKA["steps"][partitions], strict=True):
        got = assign({m: frozenset({"t"}) for m in ids}, {"t": p}, {m: previous.get(m, frozenset()) for m in ids})
        assert _shape(got, p) == [per_member, holders], ids
        assert sum(len(got[m] & previous.get(m, frozenset())) for m in ids) == kept, ids
        previous = got
