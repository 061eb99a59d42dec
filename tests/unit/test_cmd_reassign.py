"""raftka/cli/reassign_decisions.py, the pure part of `raftka reassign` and `raftka brokers`: kafka-reassign-partitions' JSON files, proposals, verify wording."""

from __future__ import annotations

import json

import pytest

from raftka.cli.reassign_decisions import (
    UsageError,
    format_assignment,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    propose,
    throttle_configs,
    verify_lines,
)


def test_topics_to_move_file() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}') == ["a", "b"]


@pytest.mark.parametrize("text,message", [
    ("nope", "not JSON"),
    ("[]", "must be a JSON object"),
    ('{"version":2,"topics":[{"topic":"a"}]}', "version 2 is not supported"),
    ('{"topics":[]}', 'non-empty "topics"'),
    ('{"topics":[{"name":"a"}]}', '"topic" string'),
])
def test_topics_to_move_refusals(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_topics_to_move(text)


def test_reassignment_file_round_trips_kafkas_format() -> None:
    text = ('{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,1],"log_dirs":["any","any"]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}')
    plan = parse_reassignment(text)
    assert plan == {("t", 1): (3, 1), ("t", 0): (2,)}
    assert json.loads(format_assignment(plan)) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}


@pytest.mark.parametrize("entry,message", [
    ({"topic": "t", "partition": 0, "replicas": []}, "non-empty list"),
    ({"topic": "t", "partition": 0, "replicas": [1, 1]}, "more than once"),
    ({"topic": "t", "partition": "0", "replicas": [1]}, '"partition" integer'),
    ({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}, 'only "any"'),
])
def test_reassignment_file_refusals(entry: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_reassignment(json.dumps({"version": 1, "partitions": [entry]}))
    with pytest.raises(UsageError, match="more than once"):
        parse_reassignment(json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}))


def test_broker_list() -> None:
    assert parse_broker_list("1,2, 4") == [1, 2, 4]
    for bad in ("", "1,x", "1,1"):
        with pytest.raises(UsageError):
            parse_broker_list(bad)


def test_propose_keeps_replication_factor_and_uses_only_the_listed_brokers() -> None:
    current = {("a", 0): (1, 2), ("a", 1): (2, 3), ("b", 0): (1,)}
    proposed = propose(current, {1: None, 2: None, 3: None, 4: None}, [3, 4])
    assert set(proposed) == set(current)
    assert all(len(proposed[k]) == len(current[k]) and set(proposed[k]) <= {3, 4} for k in current)
    assert proposed[("a", 0)][0] != proposed[("a", 1)][0]  # leaders rotate


def test_propose_is_rack_aware_unless_disabled() -> None:
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    proposed = propose({("t", p): (1, 2) for p in range(4)}, racks, [1, 2, 3, 4])
    assert all({racks[r] for r in replicas} == {"r1", "r2"} for replicas in proposed.values())
    with pytest.raises(UsageError, match="not in the cluster"):
        propose({("t", 0): (1,)}, racks, [9])
    with pytest.raises(UsageError, match="replication factor 2"):
        propose({("t", 0): (1, 2)}, racks, [1])


def test_verify_wording() -> None:
    plan = {("t", 0): (2,), ("t", 1): (3,), ("t", 2): (1,)}
    lines, done = verify_lines(plan, {("t", 0): (2,), ("t", 1): (3, 1), ("t", 2): (2,)}, {("t", 1): object()})
    assert lines == ["Reassignment of partition t-0 is completed.",
                     "Reassignment of partition t-1 is still in progress.",
                     "There is no active reassignment of partition t-2, but replica set is [2] rather than [1]."]
    assert not done
    assert verify_lines({("t", 0): (2,)}, {("t", 0): (2,)}, {}) == (
        ["Reassignment of partition t-0 is completed."], True)


def test_drain_plan_replaces_the_node_with_the_least_loaded_live_broker() -> None:
    from raftka.cli.reassign_decisions import plan_drain

    current = {("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 4), ("u", 0): (2,)}
    plan, stuck = plan_drain(current, [1, 2, 3, 4], 2)
    assert not stuck
    assert set(plan) == {("t", 0), ("t", 1), ("u", 0)}  # t-2 has no replica on 2
    assert all(2 not in replicas for replicas in plan.values())
    assert plan[("t", 0)][1] != 1 and plan[("t", 1)][1] == 3 and plan[("t", 1)][0] != 3  # position kept
    # Load evens out: the three moved replicas do not all land on one broker.
    assert len({b for k in plan for b in set(plan[k]) - set(current[k])}) > 1


def test_drain_plan_reports_partitions_that_cannot_move() -> None:
    from raftka.cli.reassign_decisions import plan_drain

    plan, stuck = plan_drain({("t", 0): (1, 2), ("t", 1): (1,)}, [1, 2], 1)
    assert plan == {("t", 1): (2,)}
    assert "needs another live broker" in stuck[("t", 0)]


@pytest.mark.parametrize(("current", "live", "expected"), [
    # A broker just added (4) takes one replica from each of the most loaded, in place: where
    # the donor came first, the new broker is now preferred and will lead.
    ({("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 1), ("t", 3): (1, 2)}, [1, 2, 3, 4],
     {("t", 0): (4, 2), ("t", 1): (4, 3)}),
    # Already even (no two brokers differ by more than one): nothing moves.
    ({("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 1)}, [1, 2, 3], {}),
    # A replica on a broker that is not live stays (draining it is `brokers drain`).
    ({("t", 0): (1, 9), ("t", 1): (1,), ("t", 2): (1,)}, [1, 2], {("t", 0): (2, 9)}),
    # Replication factor = live brokers: no replica can move anywhere.
    ({("t", 0): (1, 2), ("u", 0): (1, 2)}, [1, 2, 3], {("t", 0): (3, 2)}),
    ({("t", 0): (1, 2, 3), ("u", 0): (1, 2, 3)}, [1, 2, 3], {}),
])
def test_rebalance_plan_evens_out_replicas_with_the_fewest_moves(current, live, expected) -> None:
    from raftka.cli.reassign_decisions import plan_rebalance

    plan = plan_rebalance(current, live)
    assert plan == expected
    after = {**current, **plan}
    counts = [sum(b in r for r in after.values()) for b in live]
    assert max(counts) - min(counts) <= 1 or plan == {}


def test_rebalance_plan_moves_a_partition_once_when_it_can() -> None:
    from raftka.cli.reassign_decisions import plan_rebalance

    # Two new brokers: 8 replicas over 4 brokers, 2 each, by moving two whole partitions.
    current = {("t", p): (1, 2) for p in range(4)}
    plan = plan_rebalance(current, [1, 2, 3, 4])
    after = {**current, **plan}
    assert [sum(b in r for r in after.values()) for b in (1, 2, 3, 4)] == [2, 2, 2, 2]
    assert len(plan) == 2 and all(set(r) == {3, 4} for r in plan.values())


# (name, plan, current replicas, expected {topic: (leader list, follower list)}, brokers involved)
THROTTLE_CASES = [
    ("a replica added", {("t", 0): (1, 2, 3)}, {("t", 0): (1, 2)}, {"t": ("0:1,0:2", "0:3")}, [1, 2, 3]),
    ("a replica moved", {("t", 0): (3, 2)}, {("t", 0): (1, 2)}, {"t": ("0:1,0:2", "0:3")}, [1, 2, 3]),
    ("a partition that does not move: sources only", {("t", 1): (1, 2)}, {("t", 1): (2, 1)},
     {"t": ("1:1,1:2", "")}, [1, 2]),
    ("partitions and topics apart", {("t", 0): (2,), ("t", 10): (3,), ("u", 0): (1,)},
     {("t", 0): (1,), ("t", 10): (1,), ("u", 0): (2,)},
     {"t": ("0:1,10:1", "0:2,10:3"), "u": ("0:2", "0:1")}, [1, 2, 3]),
]


@pytest.mark.parametrize(("name", "plan", "current", "lists", "brokers"), THROTTLE_CASES,
                         ids=[c[0] for c in THROTTLE_CASES])
def test_throttle_configs_are_kafka_reassign_partitions(name, plan, current, lists, brokers) -> None:
    """kafka-reassign-partitions' calculateLeaderThrottles / calculateFollowerThrottles /
    calculateReassigningBrokers."""
    assert throttle_configs(plan, current) == (lists, brokers)


def test_the_decisions_import_no_io() -> None:
    """reassign_decisions is the pure core: no trio, no click, no client (its shells have those)."""
    import ast
    from pathlib import Path

    import raftka.cli.reassign_decisions as core

    tree = ast.parse(Path(core.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported, "the module's imports were not read"
    assert not {m for m in imported if m.split(".")[0] in ("trio", "click", "socket")
                or m.startswith("raftka.client")}, imported
