"""The transactional checker: pure functions from a txn-workload history to its anomalies.

Laid out as chaos/checker.py: `analyse` builds the indexes once, then one function per
anomaly returns its cases, and `check` runs the `FINDERS` table. The history
(chaos/txn_workload.py) holds, besides nemesis ops:

- `txn`   a producer's transaction: value {"writes": [[partition, value], ...],
          "intent": "commit" | "abort"} on the txn topic; `ok` = it ended as intended,
          `fail` = it definitely did not commit, `info` = unknown.
- `send`  a plain input record for the pipeline (value, partition, offset on ok).
- `ctp`   one consume-transform-produce transaction: value {"inputs": [[p, o, v], ...],
          "writes": [[partition, value], ...]} (each output value is its input's value).
- `txn-poll` / `txn-drain`  a read_committed consumer's reads: value {"topic": role,
          "records": [[partition, offset, value], ...]}; the drains read each topic to its
          end after the faults are healed. Roles: "txn", "in", "out".

Values are unique ints. Anomalies (Jepsen's names where one exists), all forbidden:
- `G1a` (aborted read): a read shows a value of a transaction that did not commit;
- `lost-write`: a committed transaction's value is missing from the final drain;
- `non-atomic`: the final drain shows some but not all of one transaction's values;
- `nonmonotonic`: one reader's successive reads of a partition go backwards in offset, or a
  transaction's values on one partition are drained out of the order they were sent;
- `duplicate`: one value at two offsets;
- `unexpected`: a value read that nobody wrote;
- `ctp-missing` / `ctp-duplicate`: an input drained from the input topic appears in the
  output topic zero times / more than once (exactly-once consume-transform-produce).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from raftka.chaos.checker import CheckResult
from raftka.chaos.history import NEMESIS, Op

Case = dict[str, Any]
TXN_ANOMALIES = ("G1a", "lost-write", "non-atomic", "nonmonotonic", "duplicate", "unexpected",
                 "ctp-missing", "ctp-duplicate")
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


@dataclass(frozen=True)
class TxnCheckResult(CheckResult):
    def failed(self) -> list[str]:
        return [name for name in TXN_ANOMALIES if self.anomalies.get(name)]


@dataclass
class Txn:
    """One transaction: who ran it, what it wrote (in order) and how it ended."""

    process: Any
    role: str  # "txn" or "out" (a pipeline's transaction)
    writes: list[tuple[int, int]]  # (partition, value) in send order
    outcome: str = UNKNOWN


@dataclass
class TxnAnalysis:
    txns: list[Txn] = field(default_factory=list)
    txn_of: dict[tuple[str, int], Txn] = field(default_factory=dict)  # (role, value) -> txn
    inputs_sent: set[int] = field(default_factory=set)
    # reads: (process, role, records) in history order, drains separately
    reads: list[tuple[Any, str, list[tuple[int, int, int]]]] = field(default_factory=list)
    drained: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)


def _outcome(o: Op, intent: str) -> str:
    if o.type == "ok":
        return COMMITTED if intent == "commit" else ABORTED
    if o.type == "fail":
        return ABORTED
    return UNKNOWN


def _records(value: Any) -> list[tuple[int, int, int]]:
    return [(int(p), int(off), int(v)) for p, off, v in value.get("records", ())]


def analyse(history: Iterable[Op]) -> TxnAnalysis:
    a = TxnAnalysis()
    open_: dict[Any, Txn] = {}
    for o in history:
        if o.process == NEMESIS:
            continue
        if o.f in ("txn", "ctp"):
            if o.type == "invoke":
                role = "txn" if o.f == "txn" else "out"
                txn = Txn(o.process, role, [(int(p), int(v)) for p, v in o.value["writes"]])
                open_[o.process] = txn
                a.txns.append(txn)
                for _, v in txn.writes:
                    a.txn_of[(role, v)] = txn
            elif o.process in open_:
                txn = open_.pop(o.process)
                intent = o.value.get("intent", "commit") if isinstance(o.value, dict) else "commit"
                txn.outcome = _outcome(o, intent)
        elif o.f == "send" and o.type == "invoke":
            a.inputs_sent.add(int(o.value))
        elif o.f == "txn-poll" and o.type == "ok":
            a.reads.append((o.process, o.value["topic"], _records(o.value)))
        elif o.f == "txn-drain" and o.type == "ok":
            a.drained.setdefault(o.value["topic"], []).extend(_records(o.value))
            a.reads.append((o.process, o.value["topic"], _records(o.value)))
    return a


def g1a_cases(a: TxnAnalysis) -> list[Case]:
    out = []
    for process, role, records in a.reads:
        for p, off, v in records:
            txn = a.txn_of.get((role, v))
            if txn is not None and txn.outcome == ABORTED:
                out.append({"process": process, "topic": role, "partition": p, "offset": off,
                            "value": v, "writer": txn.process})
    return out


def _drained_values(a: TxnAnalysis, role: str) -> dict[int, list[tuple[int, int]]]:
    seen: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for p, off, v in a.drained.get(role, ()):
        if (p, off) not in seen[v]:
            seen[v].append((p, off))
    return seen


def _drained_txns(a: TxnAnalysis) -> Iterator[tuple[Txn, dict[int, list[tuple[int, int]]]]]:
    """Each transaction whose topic was drained, with that topic's drained values."""
    for role in ("txn", "out"):
        if role in a.drained:
            seen = _drained_values(a, role)
            yield from ((txn, seen) for txn in a.txns if txn.role == role)


def lost_write_cases(a: TxnAnalysis) -> list[Case]:
    return [{"topic": txn.role, "partition": p, "value": v, "writer": txn.process}
            for txn, seen in _drained_txns(a) if txn.outcome == COMMITTED
            for p, v in txn.writes if v not in seen]


def non_atomic_cases(a: TxnAnalysis) -> list[Case]:
    out = []
    for txn, seen in _drained_txns(a):
        present = [v for _, v in txn.writes if v in seen]
        if present and len(present) < len(txn.writes):
            out.append({"topic": txn.role, "writer": txn.process, "outcome": txn.outcome,
                        "seen": present, "missing": [v for _, v in txn.writes if v not in seen]})
    return out


def nonmonotonic_cases(a: TxnAnalysis) -> list[Case]:
    out = []
    last: dict[tuple[Any, str, int], int] = {}
    for process, role, records in a.reads:
        for p, off, v in records:
            key = (process, role, p)
            if key in last and off <= last[key]:
                out.append({"process": process, "topic": role, "partition": p,
                            "previous": last[key], "offset": off, "value": v})
            last[key] = off
    for txn, seen in _drained_txns(a):
        by_partition: dict[int, list[int]] = defaultdict(list)
        for p, v in txn.writes:
            if seen.get(v):
                by_partition[p].append(seen[v][0][1])
        for p, offsets in by_partition.items():
            if offsets != sorted(offsets):
                out.append({"topic": txn.role, "partition": p, "writer": txn.process,
                            "offsets_in_send_order": offsets})
    return out


def duplicate_cases(a: TxnAnalysis) -> list[Case]:
    out = []
    for role in a.drained:
        for v, places in _drained_values(a, role).items():
            if len(places) > 1:
                out.append({"topic": role, "value": v, "at": places})
    return out


def unexpected_cases(a: TxnAnalysis) -> list[Case]:
    out = []
    for process, role, records in a.reads:
        for p, off, v in records:
            known = v in a.inputs_sent if role == "in" else (role, v) in a.txn_of
            if not known:
                out.append({"process": process, "topic": role, "partition": p, "offset": off,
                            "value": v})
    return out


def ctp_missing_cases(a: TxnAnalysis) -> list[Case]:
    if "in" not in a.drained or "out" not in a.drained:
        return []
    outputs = _drained_values(a, "out")
    return [{"input": v, "partition": p, "offset": off}
            for p, off, v in a.drained["in"] if v not in outputs]


def ctp_duplicate_cases(a: TxnAnalysis) -> list[Case]:
    if "out" not in a.drained:
        return []
    return [{"input": v, "outputs": places}
            for v, places in _drained_values(a, "out").items() if len(places) > 1]


FINDERS: dict[str, Callable[[TxnAnalysis], list[Case]]] = {
    "G1a": g1a_cases,
    "lost-write": lost_write_cases,
    "non-atomic": non_atomic_cases,
    "nonmonotonic": nonmonotonic_cases,
    "duplicate": duplicate_cases,
    "unexpected": unexpected_cases,
    "ctp-missing": ctp_missing_cases,
    "ctp-duplicate": ctp_duplicate_cases,
}
assert tuple(FINDERS) == TXN_ANOMALIES


def stats(a: TxnAnalysis) -> dict[str, Any]:
    outcomes: dict[str, int] = defaultdict(int)
    for txn in a.txns:
        outcomes[f"{txn.role}-{txn.outcome}"] += 1
    return {"transactions": dict(outcomes), "inputs": len(a.inputs_sent),
            "drained": {role: len(records) for role, records in a.drained.items()}}


def check(history: Iterable[Op]) -> TxnCheckResult:
    a = analyse(history)
    anomalies = {name: find(a) for name, find in FINDERS.items()}
    forbidden = frozenset(TXN_ANOMALIES)
    return TxnCheckResult(not any(anomalies.values()), anomalies, forbidden, stats(a))
