"""Each anomaly function of the checker on its own: a history in, exactly its cases out.

The whole-checker tests (verdicts, properties) are in test_checker.py; here every row is
(finder, what the history shows, history, the cases the finder must return).
"""

from __future__ import annotations

import pytest

from raftka.chaos.checker import (
    ANOMALIES,
    FINDERS,
    analyse,
    duplicate_cases,
    g1a_cases,
    inconsistent_offset_cases,
    leader_epoch_regression_cases,
    lost_middle_cases,
    lost_postfix_cases,
    lost_prefix_cases,
    lost_topic_change_cases,
    lost_write_cases,
    metadata_divergence_cases,
    nonmonotonic_poll_cases,
    nonmonotonic_send_cases,
    poll_skip_cases,
    quorum_critical_cases,
    undetected_corruption_cases,
    undrained_cases,
    unexpected_cases,
    unseen_cases,
)
from raftka.chaos.history import op
from tests.chaos.test_checker import poll, send


def assign(process: int, partitions: list[int], t: float) -> list:
    return [op(process, "invoke", "assign", partitions, time=t), op(process, "ok", "assign", partitions, time=t)]


def gassign(process: int, partitions: list[int], epoch: int, t: float) -> list:
    return [op(process, "invoke", "assign", time=t),
            op(process, "ok", "assign", {"partitions": partitions, "epoch": epoch}, time=t)]


def gpoll(process: int, records: list[tuple[int, int, int]], epoch: int, t: float) -> list:
    return [op(process, "invoke", "poll", time=t, epoch=epoch),
            op(process, "ok", "poll", records, time=t + 0.01, epoch=epoch)]


def drain(partition: int, records: list[tuple[int, int, int]], t: float = 5.0) -> list:
    return [op("drain", "invoke", "drain", partition=partition, time=t),
            op("drain", "ok", "drain", records, partition, len(records), time=t + 0.1)]


def corrupt(detected: bool) -> list:
    return [op("nemesis", "info", "corrupt", {"id": 0, "node": 2, "kind": "flip", "phase": "start"}, time=4.0),
            op("nemesis", "info", "corrupt", {"id": 0, "node": 2, "kind": "flip", "phase": "checked",
                                              "detected": detected}, time=5.0)]


def voter(node: int, offset: int, digest: str | None, image_offset: int | None = None) -> dict:
    return {"node_id": node, "reachable": True, "image_offset": offset if image_offset is None else image_offset,
            "image_digest_offset": offset, "image_digest": digest}


def quorum(*voters: dict, t: float = 1.0) -> list:
    return [op("probe", "ok", "quorum-status", {"final": False, "voters": list(voters)}, time=t)]


def final(converged: bool, *voters: dict) -> list:
    return [op("harness", "info", "metadata-final", {"converged": converged, "voters": list(voters)}, time=9.0)]


def topic(f: str, name: str, outcome: str = "ok", t: float = 1.0) -> list:
    return [op("meta", "invoke", f, name, time=t), op("meta", outcome, f, name, time=t + 0.1)]


def node_md(node: int, topics: dict, *, pid: int = 100, is_final: bool = False, t: float = 1.0) -> list:
    return [op("probe", "ok", "node-metadata", {"node": node, "pid": pid, "final": is_final, "topics": topics},
               time=t)]


THREE = [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *send(0, 3, 0, 2)]  # values 1, 2, 3 at offsets 0..2 of p0


def lost(value: int, offset: int, *, polled: bool = False, process: int = 0) -> dict:
    return {"value": value, "partition": 0, "offset": offset, "process": process, "acked_at": 0.01,
            "polled_before_drain": polled}


TABLE = [
    # --- unexpected
    (unexpected_cases, "a value nobody sent", [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1), (0, 1, 77)])],
     [{"value": 77}]),
    (unexpected_cases, "a failed send that was read is G1a, not unexpected",
     [*send(0, 1, 0, None, outcome="fail"), *poll(9, [(0, 0, 1)])], []),
    (unexpected_cases, "a send never completed may be read", [op(0, "invoke", "send", 1, 0), *poll(9, [(0, 0, 1)])], []),
    # --- G1a
    (g1a_cases, "a failed send read back", [*send(0, 1, 0, 0), *send(0, 2, 0, None, outcome="fail"),
                                            *poll(9, [(0, 0, 1), (0, 1, 2)])], [{"value": 2, "partition": 0}]),
    (g1a_cases, "an indeterminate send read back", [*send(0, 2, 0, None, outcome="info"), *poll(9, [(0, 0, 2)])], []),
    # --- inconsistent offsets
    (inconsistent_offset_cases, "a read puts another value where an ack said 1 is",
     [*send(0, 1, 0, 0), *send(1, 2, 0, 1), *poll(8, [(0, 0, 2)])],
     [{"partition": 0, "offset": 0, "values": {"1": ["send"], "2": ["poll:8"]}}]),
    (inconsistent_offset_cases, "two readers agree with the ack",
     [*send(0, 1, 0, 0), *poll(8, [(0, 0, 1)]), *poll(9, [(0, 0, 1)])], []),
    # --- duplicate
    (duplicate_cases, "a value at two offsets", [*send(0, 1, 0, 0), *send(0, 2, 0, 1),
                                                 *poll(9, [(0, 0, 1), (0, 1, 2), (0, 2, 1)])],
     [{"value": 1, "at": [(0, 0), (0, 2)]}]),
    (duplicate_cases, "a value read twice at the same offset", [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1)]),
                                                                *poll(8, [(0, 0, 1)])], []),
    # --- nonmonotonic send
    (nonmonotonic_send_cases, "one producer's later ack has a lower offset",
     [*send(0, 1, 0, 5), *send(0, 2, 0, 3)],
     [{"process": 0, "partition": 0, "previous": {"offset": 5, "value": 1}, "next": {"offset": 3, "value": 2}}]),
    (nonmonotonic_send_cases, "two producers interleave", [*send(0, 1, 0, 5), *send(1, 2, 0, 3)], []),
    (nonmonotonic_send_cases, "one producer, two partitions", [*send(0, 1, 0, 5), *send(0, 2, 1, 3)], []),
    # --- nonmonotonic poll
    (nonmonotonic_poll_cases, "a consumer reads offset 0 again",
     [*send(0, 1, 0, 0), *send(0, 2, 0, 1), *poll(9, [(0, 0, 1), (0, 1, 2)]), *poll(9, [(0, 0, 1)], t=2.0)],
     [{"process": 9, "partition": 0, "previous": 1, "offset": 0, "value": 1, "time": 2.01}]),
    (nonmonotonic_poll_cases, "an assign op restarts the consumer's positions",
     [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1)]), *assign(9, [0], 1.5), *poll(9, [(0, 0, 1)], t=2.0)], []),
    (nonmonotonic_poll_cases, "another consumer starting over", [*send(0, 1, 0, 0), *poll(9, [(0, 0, 1)]),
                                                                 *poll(8, [(0, 0, 1)], t=2.0)], []),
    (nonmonotonic_poll_cases, "group mode: going back within one assignment epoch",
     [*send(0, 1, 0, 0), *gassign(9, [0], 1, 0.5), *gpoll(9, [(0, 0, 1)], 1, 1.0), *gpoll(9, [(0, 0, 1)], 1, 2.0)],
     [{"process": 9, "partition": 0, "previous": 0, "offset": 0, "value": 1, "time": 2.01, "epoch": 1}]),
    # --- poll skip
    (poll_skip_cases, "a consumer jumps over offset 1, which holds 2",
     [*THREE, *poll(9, [(0, 0, 1), (0, 2, 3)])],
     [{"process": 9, "partition": 0, "previous": 0, "offset": 2, "value": 3, "time": 1.01, "skipped": [1],
       "skipped_count": 1}]),
    (poll_skip_cases, "a jump over an offset nothing is known at",
     [*send(0, 1, 0, 0), *send(0, 3, 0, 2), *poll(9, [(0, 0, 1), (0, 2, 3)])], []),
    (poll_skip_cases, "group mode: a jump across a new assignment of the partition",
     [*THREE, *gassign(9, [0], 1, 0.5), *gpoll(9, [(0, 0, 1)], 1, 1.0), *gassign(9, [0], 2, 1.5),
      *gpoll(9, [(0, 2, 3)], 2, 2.0)], []),
    # --- lost write and unseen
    (lost_write_cases, "offset 1 never read, offset 2 read",
     [*THREE, *poll(9, [(0, 0, 1), (0, 2, 3)])], [lost(2, 1)]),
    (lost_write_cases, "read earlier, missing from the final drain",
     [*THREE, *poll(9, [(0, 0, 1), (0, 1, 2), (0, 2, 3)]), *drain(0, [(0, 0, 1), (0, 1, 3)])],
     [lost(2, 1, polled=True)]),
    (lost_write_cases, "nothing read past it: unseen, not lost", [*THREE, *poll(9, [(0, 0, 1)])], []),
    (unseen_cases, "nothing read past offset 0", [*THREE, *poll(9, [(0, 0, 1)])], [lost(2, 1), lost(3, 2)]),
    (unseen_cases, "drained partitions leave nothing unseen", [*THREE, *drain(0, [(0, 0, 1)])], []),
    (unseen_cases, "a failed send need not be read", [*send(0, 1, 0, None, outcome="fail")], []),
    # --- where lost writes sit
    (lost_prefix_cases, "the first acked write is lost", [*THREE, *poll(9, [(0, 1, 2), (0, 2, 3)])],
     [{"value": 1, "partition": 0, "offset": 0}]),
    (lost_middle_cases, "a write between two read ones is lost", [*THREE, *poll(9, [(0, 0, 1), (0, 2, 3)])],
     [{"value": 2, "partition": 0, "offset": 1}]),
    (lost_postfix_cases, "the drain lost the tail", [*THREE, *drain(0, [(0, 0, 1)])],
     [{"value": 2, "partition": 0, "offset": 1}, {"value": 3, "partition": 0, "offset": 2}]),
    (lost_middle_cases, "the drain lost the tail: no middle", [*THREE, *drain(0, [(0, 0, 1)])], []),
    (lost_postfix_cases, "unseen writes are not lost ones", [*THREE, *poll(9, [(0, 0, 1)])], []),
    # --- corruption
    (undetected_corruption_cases, "the node never reported the flipped segment", corrupt(detected=False),
     [{"id": 0, "node": 2, "kind": "flip", "detected": False}]),
    (undetected_corruption_cases, "the node reported it", corrupt(detected=True), []),
    # --- metadata divergence
    (metadata_divergence_cases, "two voters, one offset, two digests",
     [*quorum(voter(1, 7, "aa"), voter(2, 7, "bb")), *quorum(voter(3, 7, "aa"), t=2.0)],
     [{"offset": 7, "digests": {"aa": [1, 3], "bb": [2]}}]),
    (metadata_divergence_cases, "different offsets may differ; a voter without a digest is skipped",
     [*quorum(voter(1, 7, "aa"), voter(2, 8, "bb"), voter(3, 7, None))], []),
    (metadata_divergence_cases, "the images did not converge after the heal",
     [*final(False, voter(1, 7, "aa"), voter(2, 5, "cc"))],
     [{"after_heal": "the quorum did not settle: one leader, and one image offset and digest on every voter",
       "voters": {1: [7, "aa"], 2: [5, "cc"]}, "missing_nodes": []}]),
    (metadata_divergence_cases, "converged", [*final(True, voter(1, 7, "aa"), voter(2, 7, "aa"))], []),
    # --- lost topic change
    (lost_topic_change_cases, "an acknowledged creation missing on node 2",
     [*topic("create-topic", "m1"), *node_md(1, {"m1": {}}, is_final=True), *node_md(2, {}, is_final=True)],
     [{"topic": "m1", "change": "create", "node": 2, "found": False}]),
    (lost_topic_change_cases, "an acknowledged deletion still present on node 1",
     [*topic("create-topic", "m1"), *topic("delete-topic", "m1", t=2.0), *node_md(1, {"m1": {}}, is_final=True)],
     [{"topic": "m1", "change": "delete", "node": 1, "found": True}]),
    (lost_topic_change_cases, "indeterminate changes may go either way; non-final samples do not count",
     [*topic("create-topic", "m1", "info"), *topic("create-topic", "m2"), *topic("delete-topic", "m2", "info"),
      *node_md(1, {}, is_final=False, t=0.5), *node_md(1, {"m1": {}}, is_final=True)], []),
    # --- leader epoch regression
    (leader_epoch_regression_cases, "node 1 reports epoch 3 after 4",
     [*node_md(1, {"t": {0: 4}}, t=1.0), *node_md(1, {"t": {0: 3}}, t=2.0)],
     [{"node": 1, "pid": 100, "topic": "t", "partition": 0, "epoch": 3, "time": 2.0,
       "previous": {"epoch": 4, "time": 1.0}}]),
    (leader_epoch_regression_cases, "another node, a restarted process, or unknown (-1) epochs",
     [*node_md(1, {"t": {0: 4}}, t=1.0), *node_md(2, {"t": {0: 3}}, t=2.0),
      *node_md(1, {"t": {0: 2}}, pid=101, t=3.0), *node_md(2, {"t": {0: -1}}, t=4.0)], []),
    # --- quorum critical
    (quorum_critical_cases, "pysyncobj truncated applied entries on node 3",
     [op("harness", "info", "log-scan", {"node": 3, "critical": ["CRITICAL:pysyncobj.syncobj:truncating"]})],
     [{"node": 3, "line": "CRITICAL:pysyncobj.syncobj:truncating"}]),
    (quorum_critical_cases, "clean logs", [op("harness", "info", "log-scan", {"node": 3, "critical": []})], []),
    # --- undrained: the final reads never completed, so "read once" is all the checker knows
    (undrained_cases, "the drain gave up",
     [*send(0, 1, 0, 0), *poll(1, [(0, 0, 1)], t=1.0),
      op("drain", "info", "drain", error="could not read every partition to its end in 30s", time=9.0)],
     [{"time": 9.0, "error": "could not read every partition to its end in 30s", "value": None}]),
    (undrained_cases, "every partition drained", [*send(0, 1, 0, 0), *drain(0, [(0, 0, 1)])], []),
]


@pytest.mark.parametrize("finder,what,history,expected", TABLE,
                         ids=[f"{row[0].__name__}: {row[1]}" for row in TABLE])
def test_anomaly_function(finder, what, history, expected):
    assert finder(analyse(history)) == expected


def test_every_anomaly_has_one_function_and_table_rows():
    assert tuple(FINDERS) == ANOMALIES
    tested = {row[0] for row in TABLE}
    assert set(FINDERS.values()) <= tested


def test_analysis_indexes():
    h = [op("h", "info", "config", {"idempotence": True}), *send(0, 1, 0, 0),
         op(1, "invoke", "send", 2, 1), op(1, "info", "send", 2, 1, time=0.5),
         *poll(9, [(0, 0, 1)]), *poll(9, [(0, 1, 4)], t=2.0), *drain(1, [])]
    a = analyse(h)
    assert a.idempotent and not analyse(h, idempotent=False).idempotent
    assert a.acked == [(0, 1)]
    assert (a.sends[2].outcome, a.sends[2].offset) == ("info", None)
    assert a.polled == {1, 4} and a.first_seen == {1: 1.01, 4: 2.01}
    assert a.max_polled == {0: 1} and a.drained == {1: set()}
    assert a.known_offsets == {0: [0, 1]}
    assert [(s.previous, s.offset) for s in a.poll_steps] == [(0, 1)]
