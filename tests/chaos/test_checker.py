"""The queue checker on hand-built histories: each anomaly flagged, clean histories valid."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.chaos.checker import ANOMALIES, check
from raftka.chaos.history import Op, op, read_history, write_history


def send(process: int, value: int, partition: int, offset: int | None, outcome: str = "ok",
         t: float = 0.0) -> list[Op]:
    return [op(process, "invoke", "send", value, partition, time=t),
            op(process, outcome, "send", value, partition, offset if outcome == "ok" else None, time=t + 0.01)]


def poll(process: int, records: list[tuple[int, int, int]], t: float = 1.0) -> list[Op]:
    return [op(process, "invoke", "poll", time=t), op(process, "ok", "poll", records, time=t + 0.01)]


def clean() -> list[Op]:
    """Two producers, one partition each, a consumer that read everything."""
    h = [op("harness", "info", "config", {"idempotence": True})]
    h += send(0, 1, 0, 0) + send(1, 2, 1, 0) + send(0, 3, 0, 1) + send(1, 4, 1, 1)
    h += poll(9, [(0, 0, 1), (0, 1, 3)]) + poll(9, [(1, 0, 2), (1, 1, 4)], t=2.0)
    return h


def _only(result, name):
    assert not result.valid, result.to_json()
    assert result.anomalies[name], result.to_json()
    return result.anomalies[name]


def test_clean_history_is_valid_with_stats():
    result = check(clean())
    assert result.valid, result.to_json()
    assert all(not result.anomalies[name] for name in ANOMALIES)
    assert result.stats["acknowledged"] == 4 and result.stats["values_polled"] == 4
    assert result.stats["worst_lag_s"] > 0


CASES = {
    "metadata-divergence": [op("probe", "ok", "quorum-status", {"voters": [
        {"node_id": 1, "image_digest_offset": 3, "image_digest": "a"},
        {"node_id": 2, "image_digest_offset": 3, "image_digest": "b"}]})],
    "lost-topic-change": [op("meta", "invoke", "create-topic", "m"), op("meta", "ok", "create-topic", "m"),
                          op("probe", "ok", "node-metadata", {"node": 1, "final": True, "topics": {}})],
    "leader-epoch-regression": [op("probe", "ok", "node-metadata", {"node": 1, "topics": {"t": {"0": 2}}}),
                                op("probe", "ok", "node-metadata", {"node": 1, "topics": {"t": {"0": 1}}})],
    "quorum-critical": [op("harness", "info", "log-scan", {"node": 1, "critical": ["CRITICAL:x:y"]})],
    # acked value 3 at offset 1 never read, but offset 2 was read
    "lost-write": [*send(0, 1, 0, 0), *send(0, 3, 0, 1), *send(0, 5, 0, 2),
                   *poll(9, [(0, 0, 1), (0, 2, 5)])],
    # acked 3 at offset 1 never read, nothing above it read either
    "unseen": [*send(0, 1, 0, 0), *send(0, 3, 0, 1), *poll(9, [(0, 0, 1)])],
    "duplicate": [op("h", "info", "config", {"idempotence": True}), *send(0, 1, 0, 0), *send(0, 2, 0, 1),
                  *poll(9, [(0, 0, 1), (0, 1, 2), (0, 2, 1)])],
    "inconsistent-offsets": [*send(0, 1, 0, 0), *send(1, 2, 0, 1), *poll(9, [(0, 0, 1)]), *poll(8, [(0, 0, 2), (0, 1, 2)])],
    "G1a": [*send(0, 1, 0, 0), *send(0, 2, 0, None, outcome="fail"), *poll(9, [(0, 0, 1), (0, 1, 2)])],
    "nonmonotonic-send": [*send(0, 1, 0, 5), *send(0, 2, 0, 3), *poll(9, [(0, 3, 2), (0, 5, 1)])],
    "nonmonotonic-poll": [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *poll(9, [(0, 0, 1), (0, 1, 2)]),
                          *poll(9, [(0, 0, 1)], t=2.0)],
    "poll-skip": [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *send(0, 3, 0, 2), *poll(9, [(0, 0, 1), (0, 2, 3)]),
                  *poll(8, [(0, 1, 2)])],
    "unexpected": [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1), (0, 1, 77)])],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_anomaly_is_flagged(name):
    cases = _only(check(CASES[name]), name)
    assert name in check(CASES[name]).failed()
    json.dumps(check(CASES[name]).to_json())  # the report must serialise
    assert cases


def test_lost_write_case_names_the_value_and_where_it_sits():
    result = check(CASES["lost-write"])
    (case,) = result.anomalies["lost-write"]
    assert (case["value"], case["partition"], case["offset"]) == (3, 0, 1)
    assert [c["value"] for c in result.anomalies["lost-middle"]] == [3]


def test_value_read_earlier_but_missing_from_the_final_drain_is_lost():
    """An unclean leader truncated offsets 1..2 after consumers had read them."""
    h = [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *send(0, 3, 0, 2), *poll(9, [(0, 0, 1), (0, 1, 2), (0, 2, 3)]),
         op("drain", "invoke", "drain", partition=0, time=5.0),
         op("drain", "ok", "drain", [(0, 0, 1)], partition=0, offset=1, time=5.1)]
    result = check(h)
    assert sorted(c["value"] for c in result.anomalies["lost-write"]) == [2, 3]
    assert all(c["polled_before_drain"] for c in result.anomalies["lost-write"])
    assert sorted(c["value"] for c in result.anomalies["lost-postfix"]) == [2, 3]
    assert not result.valid


def test_lost_prefix_and_postfix():
    h = [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *send(0, 3, 0, 2), *send(0, 4, 0, 3), *send(0, 5, 0, 4),
         *poll(9, [(0, 1, 2), (0, 2, 3)]), *poll(8, [(0, 4, 99)])]
    # 99 is unexpected and makes offset 4 readable, so 4 at offset 3 and 5 at offset 4 are lost too
    result = check(h)
    assert [c["value"] for c in result.anomalies["lost-prefix"]] == [1]
    assert sorted(c["value"] for c in result.anomalies["lost-postfix"]) == [4, 5]


def test_duplicates_are_allowed_without_idempotence():
    h = [op("h", "info", "config", {"idempotence": False}), *CASES["duplicate"][1:]]
    result = check(h)
    assert result.anomalies["duplicate"] and result.valid


def test_assign_resets_poll_order():
    h = [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *poll(9, [(0, 0, 1), (0, 1, 2)]),
         op(9, "invoke", "assign", [0]), op(9, "ok", "assign", [0]), *poll(9, [(0, 0, 1)], t=3.0)]
    assert check(h).valid


def test_indeterminate_sends_may_or_may_not_appear():
    h = [*send(0, 1, 0, 0), *send(0, 2, 0, None, outcome="info"), *send(5, 3, 0, None, outcome="info"),
         *poll(9, [(0, 0, 1), (0, 1, 3)])]
    result = check(h)
    assert result.valid, result.to_json()
    assert result.stats["indeterminate"] == 2


def test_unavailability_window_is_the_longest_gap_between_successful_sends():
    h = [*send(0, 1, 0, 0, t=0.0), *send(0, 2, 0, None, outcome="info", t=1.0),
         *send(1, 3, 0, 1, t=5.0), *poll(9, [(0, 0, 1), (0, 1, 3)], t=6.0)]
    stats = check(h).stats
    assert stats["longest_unavailability_s"] == pytest.approx(5.0)
    assert stats["unavailability_window"] == [0.01, 5.01]


def test_history_round_trips_through_json_lines(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(path, clean())
    assert read_history(path) == clean()
    assert check(read_history(path)).valid


# --- property: a simulated correct queue is valid; dropping an acked message never is ------


@st.composite
def queue_runs(draw):
    """A correct queue run: sequential producers append to partitions, consumers read
    prefixes in order, a final drain reads everything."""
    partitions = draw(st.integers(1, 3))
    producers = draw(st.integers(1, 3))
    logs: dict[int, list[int]] = {p: [] for p in range(partitions)}
    ops: list[Op] = [op("h", "info", "config", {"idempotence": True})]
    value, t = 0, 0.0
    for _ in range(draw(st.integers(1, 25))):
        t += 0.1
        process = draw(st.integers(0, producers - 1))
        p = draw(st.integers(0, partitions - 1))
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
        value += 1
        written = outcome == "ok" or (outcome == "info" and draw(st.booleans()))
        offset = len(logs[p])
        if written:
            logs[p].append(value)
        ops += [op(process, "invoke", "send", value, p, time=t),
                op(process, outcome, "send", value, p, offset if outcome == "ok" else None, time=t + 0.05)]
        if draw(st.booleans()):  # a consumer reads some prefix of one partition from its start
            q = draw(st.integers(0, partitions - 1))
            n = draw(st.integers(0, len(logs[q])))
            ops += [op(100 + q, "invoke", "assign", [q], time=t), op(100 + q, "ok", "assign", [q], time=t),
                    op(100 + q, "invoke", "poll", time=t),
                    op(100 + q, "ok", "poll", [(q, i, v) for i, v in enumerate(logs[q][:n])], time=t + 0.01)]
    for p, log in logs.items():
        ops += [op("drain", "invoke", "drain", partition=p, time=t + 1),
                op("drain", "ok", "drain", [(p, i, v) for i, v in enumerate(log)], p, len(log), time=t + 1.1)]
    return ops, logs


@settings(max_examples=150, deadline=None)
@given(queue_runs())
def test_property_correct_queue_is_valid(run):
    ops, _ = run
    result = check(ops)
    assert result.valid, result.to_json()


@settings(max_examples=150, deadline=None)
@given(queue_runs(), st.data())
def test_property_missing_acknowledged_write_is_never_valid(run, data):
    ops, _ = run
    acked = [(o.partition, o.offset, o.value) for o in ops if o.f == "send" and o.type == "ok"]
    if not acked:
        return
    gone = data.draw(st.sampled_from(acked))
    # remove it from every read; later offsets stay where they were (a hole) or shift down (truncation)
    shift = data.draw(st.booleans())

    def drop(records):
        out = []
        for p, o, v in records:
            if (p, o, v) == gone:
                continue
            out.append((p, o - 1 if shift and p == gone[0] and o > gone[1] else o, v))
        return out

    mutated = [Op(o.process, o.type, o.f, drop(o.value), o.partition, o.offset, o.time)
               if o.f in ("poll", "drain") and o.type == "ok" else o for o in ops]
    result = check(mutated)
    assert not result.valid
    assert {"lost-write", "unseen"} & set(result.failed())


# --- group mode: going back or skipping ahead only across a new assignment ------------------


def assign(process: int, partitions: list[int], epoch: int, t: float) -> list[Op]:
    return [op(process, "invoke", "assign", time=t),
            op(process, "ok", "assign", {"partitions": partitions, "epoch": epoch, "generation": epoch + 10}, time=t)]


def gpoll(process: int, records: list[tuple[int, int, int]], epoch: int, t: float) -> list[Op]:
    return [op(process, "invoke", "poll", time=t, epoch=epoch),
            op(process, "ok", "poll", records, time=t + 0.01, epoch=epoch)]


def four_sends() -> list[Op]:
    return [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *send(0, 3, 0, 2), *send(0, 4, 0, 3), *send(0, 5, 1, 0)]


def final_drain() -> list[Op]:
    """The heal-and-drain that read both partitions to their end."""
    logs = {0: [(0, 0, 1), (0, 1, 2), (0, 2, 3), (0, 3, 4)], 1: [(1, 0, 5)]}
    return [o for p, records in logs.items() for o in (op("drain", "invoke", "drain", partition=p, time=9.0),
                                                        op("drain", "ok", "drain", records, p, len(records), 9.1))]


# (name, history after four_sends(), the anomaly expected or None for a valid history)
GROUP_CASES = [
    ("skip across a new assignment of the partition",
     [*assign(9, [0, 1], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 1.1), *assign(9, [0], 2, 2.0),
      *gpoll(9, [(0, 3, 4)], 2, 2.1)], None),
    ("going back across a new assignment of the partition (rereading after a rebalance)",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1), (0, 1, 2), (0, 2, 3)], 1, 1.1), *assign(9, [0], 2, 2.0),
      *gpoll(9, [(0, 1, 2)], 2, 2.1)], None),
    ("skip within one assignment",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 1.1), *gpoll(9, [(0, 2, 3)], 1, 2.1)], "poll-skip"),
    ("going back within one assignment",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1), (0, 1, 2)], 1, 1.1), *gpoll(9, [(0, 0, 1)], 1, 2.1)],
     "nonmonotonic-poll"),
    # partition 0 was kept when partition 1 was newly assigned: the rebalance excuses nothing on 0
    ("skip on a partition kept across a rebalance",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 1.1), *assign(9, [1], 2, 2.0),
      *gpoll(9, [(0, 3, 4), (1, 0, 5)], 2, 2.1)], "poll-skip"),
    ("going back on a partition kept across a rebalance",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1), (0, 1, 2)], 1, 1.1), *assign(9, [1], 2, 2.0),
      *gpoll(9, [(0, 1, 2)], 2, 2.1)], "nonmonotonic-poll"),
    # another member's assignment is not this one's
    ("skip excused only for the consumer that was assigned",
     [*assign(9, [0], 1, 1.0), *assign(8, [1], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 1.1),
      *assign(8, [0], 2, 2.0), *gpoll(9, [(0, 3, 4)], 1, 2.1)], "poll-skip"),
    # the assignment epoch is the poll's own: records of epoch 1 that arrive after the epoch-2
    # assign op are still judged within assignment 1
    ("a poll stamped with an older epoch is judged within that epoch",
     [*assign(9, [0], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 1.1), *assign(9, [0], 2, 2.0),
      *gpoll(9, [(0, 2, 3)], 1, 2.1)], "poll-skip"),
    ("two members sharing the work in turns, each reading on from the committed offset",
     [*assign(9, [0, 1], 1, 1.0), *gpoll(9, [(0, 0, 1), (0, 1, 2), (1, 0, 5)], 1, 1.1),
      *assign(8, [0], 1, 2.0), *assign(9, [1], 2, 2.0), *gpoll(8, [(0, 2, 3), (0, 3, 4)], 1, 2.1)], None),
]


@pytest.mark.parametrize("name,history,expected", GROUP_CASES, ids=[c[0] for c in GROUP_CASES])
def test_group_polls_may_jump_only_across_a_new_assignment(name, history, expected):
    result = check([*four_sends(), *history, *final_drain()])
    if expected is None:
        assert result.valid, result.to_json()
    else:
        assert result.failed() == [expected], result.to_json()
        assert all(case["epoch"] is not None for case in result.anomalies[expected])


def test_assign_mode_assign_resets_only_the_partitions_it_names():
    h = [*four_sends(), *poll(9, [(0, 0, 1), (1, 0, 5)]), op(9, "invoke", "assign", [1]),
         op(9, "ok", "assign", [1]), *poll(9, [(0, 2, 3)], t=3.0), *final_drain()]
    assert check(h).failed() == ["poll-skip"]


def test_undetected_corruption_is_forbidden_and_a_detected_one_is_not():
    base = [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1)])]
    damage = {"id": 0, "node": 2, "kind": "flip", "partition": 0, "segment": "00000000000000000000.log"}
    seen = op("nemesis", "info", "corrupt", {**damage, "phase": "checked", "detected": True}, time=5.0)
    missed = op("nemesis", "info", "corrupt", {**damage, "phase": "checked", "detected": False}, time=5.0)
    assert check([*base, seen]).valid
    result = check([*base, missed])
    assert result.failed() == ["undetected-corruption"]
    assert result.anomalies["undetected-corruption"][0]["node"] == 2
