"""client/offset_reset.py: kafka-consumer-groups --reset-offsets' arithmetic, table-driven."""

from __future__ import annotations

import pytest

from raftka.client.offset_reset import ResetScenario, parse_topic_partitions, plan_reset
from raftka.client.records import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
EARLIEST = {A: 10, B: 0}
LATEST = {A: 100, B: 5}


@pytest.mark.parametrize(("scenario", "committed", "by_time", "expected"), [
    (ResetScenario("earliest"), {A: 50}, None, {A: 10, B: 0}),
    (ResetScenario("latest"), {}, None, {A: 100, B: 5}),
    (ResetScenario("offset", 40), {}, None, {A: 40, B: 5}),           # B clamped to its end
    (ResetScenario("offset", 3), {}, None, {A: 10, B: 3}),            # A clamped to its start
    (ResetScenario("shift", -5), {A: 50, B: 2}, None, {A: 45, B: 0}),
    (ResetScenario("shift", 80), {A: 50}, None, {A: 100, B: 0}),      # B: nothing committed
    (ResetScenario("datetime", 1), {}, {A: 60, B: -1}, {A: 60, B: 5}),  # -1: none that recent
])
def test_plan_reset(scenario, committed, by_time, expected) -> None:
    assert plan_reset(scenario, [A, B], committed, EARLIEST, LATEST, by_time) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ("t", [A, B]),
    ("t:1", [B]),
    ("t:1,0", [B, A]),
])
def test_parse_topic_partitions(spec, expected) -> None:
    assert parse_topic_partitions(spec, {"t": [0, 1]}) == expected


@pytest.mark.parametrize(("spec", "message"), [
    ("nope", "topic 'nope' does not exist"),
    ("t:7", "'7' is not a partition of 't'"),
    ("t:x", "'x' is not a partition"),
])
def test_parse_topic_partitions_refuses(spec, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_topic_partitions(spec, {"t": [0, 1]})


def test_scenarios_are_checked() -> None:
    with pytest.raises(ValueError, match="is not one of"):
        ResetScenario("sideways")
    with pytest.raises(ValueError, match="must be 0 or more"):
        ResetScenario("offset", -1)
