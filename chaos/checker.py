"""The queue checker: a pure function from a history to the anomalies of docs/CHAOS.md.

No clocks, no I/O: everything it knows comes from the ops (see chaos/history.py).
Each anomaly is a list of cases (plain dicts, JSON-ready) so a report can show
examples; `valid` is false as soon as a *forbidden* anomaly has a case.
Duplicates are only forbidden for idempotent producers (Kafka promises
nothing about retried non-idempotent sends). Besides the queue anomalies,
`undetected-corruption` lists segment corruptions (the `corrupt` nemesis)
that the corrupted node never reported detecting on restart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raftka.chaos.history import NEMESIS, Op

ANOMALIES = (
    "lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a", "nonmonotonic-send",
    "nonmonotonic-poll", "poll-skip", "unexpected", "lost-prefix", "lost-middle", "lost-postfix",
    "undetected-corruption",
)
# lost-prefix/middle/postfix classify lost-write cases; they add no verdict of their own.
ALWAYS_FORBIDDEN = frozenset({
    "lost-write", "unseen", "inconsistent-offsets", "G1a", "nonmonotonic-send", "nonmonotonic-poll",
    "poll-skip", "unexpected", "undetected-corruption",
})
EXAMPLES = 8  # cases kept per anomaly in the summary (all are counted)


@dataclass(frozen=True)
class CheckResult:
    valid: bool
    anomalies: dict[str, list[dict[str, Any]]]
    forbidden: frozenset[str]
    stats: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {name: len(cases) for name, cases in self.anomalies.items()}

    def failed(self) -> list[str]:
        return [name for name in ANOMALIES if self.anomalies.get(name) and name in self.forbidden]

    def to_json(self, examples: int = EXAMPLES) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "failed": self.failed(),
            "forbidden": sorted(self.forbidden),
            "counts": self.counts(),
            "anomalies": {k: v[:examples] for k, v in self.anomalies.items() if v},
            "stats": self.stats,
        }


@dataclass
class _Send:
    process: int | str
    partition: int | None
    invoke_time: float
    outcome: str = "invoke"  # ok / fail / info, or still "invoke" if never completed
    offset: int | None = None
    done_time: float | None = None


def _is_idempotent(ops: Sequence[Op]) -> bool:
    for o in ops:
        if o.f == "config" and isinstance(o.value, dict):
            return bool(o.value.get("idempotence"))
    return False


def check(history: Iterable[Op], *, idempotent: bool | None = None) -> CheckResult:
    """Check a queue history. `idempotent` defaults to the history's config op (f="config")."""
    ops = list(history)
    if idempotent is None:
        idempotent = _is_idempotent(ops)
    forbidden = ALWAYS_FORBIDDEN | ({"duplicate"} if idempotent else frozenset())
    anomalies: dict[str, list[dict[str, Any]]] = {name: [] for name in ANOMALIES}

    sends: dict[Any, _Send] = {}
    pending: dict[int | str, Any] = {}  # process -> value of its outstanding send
    acked_order: list[tuple[int | str, Any]] = []  # (process, value) in completion order
    # every (partition, offset) -> values claimed there, by whom
    at_offset: dict[tuple[int, int], dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
    first_seen: dict[Any, float] = {}
    polled_values: set[Any] = set()
    max_polled: dict[int, int] = {}
    polls: list[Op] = []

    for o in ops:
        if o.process == NEMESIS:
            continue
        if o.f == "send":
            if o.type == "invoke":
                sends[o.value] = _Send(o.process, o.partition, o.time)
                pending[o.process] = o.value
                continue
            value = o.value if o.value is not None else pending.get(o.process)
            pending.pop(o.process, None)
            send = sends.get(value)
            if send is None:
                continue
            send.outcome, send.done_time = o.type, o.time
            if o.type == "ok":
                send.partition = o.partition if o.partition is not None else send.partition
                send.offset = o.offset if o.offset is not None and o.offset >= 0 else None
                acked_order.append((o.process, value))
                if send.partition is not None and send.offset is not None:
                    at_offset[(send.partition, send.offset)][value].append("send")
        elif o.f in ("poll", "drain") and o.type == "ok" and o.value:
            polls.append(o)
            for partition, offset, value in o.value:
                at_offset[(partition, offset)][value].append(f"poll:{o.process}")
                polled_values.add(value)
                first_seen.setdefault(value, o.time)
                max_polled[partition] = max(max_polled.get(partition, -1), offset)

    # unexpected, G1a
    for value in sorted(polled_values, key=repr):
        send = sends.get(value)
        if send is None:
            anomalies["unexpected"].append({"value": value})
        elif send.outcome == "fail":
            anomalies["G1a"].append({"value": value, "partition": send.partition})

    # inconsistent-offsets and duplicate
    positions: dict[Any, set[tuple[int, int]]] = defaultdict(set)
    for (partition, offset), claims in sorted(at_offset.items()):
        for value in claims:
            positions[value].add((partition, offset))
        if len(claims) > 1:
            anomalies["inconsistent-offsets"].append({
                "partition": partition, "offset": offset,
                "values": {repr(v): sorted(set(who)) for v, who in claims.items()},
            })
    for value, where in sorted(positions.items(), key=lambda kv: repr(kv[0])):
        if len(where) > 1:
            anomalies["duplicate"].append({"value": value, "at": sorted(where)})

    # nonmonotonic-send: one process's successive acknowledged sends to a partition
    last_sent: dict[tuple[Any, int], tuple[int, Any]] = {}
    for process, value in acked_order:
        send = sends[value]
        if send.partition is None or send.offset is None:
            continue
        key = (process, send.partition)
        prev = last_sent.get(key)
        if prev is not None and send.offset <= prev[0]:
            anomalies["nonmonotonic-send"].append({
                "process": process, "partition": send.partition,
                "previous": {"offset": prev[0], "value": prev[1]},
                "next": {"offset": send.offset, "value": value}})
        last_sent[key] = (send.offset, value)

    # nonmonotonic-poll and poll-skip, per consumer and partition, within one assignment
    known_offsets: dict[int, list[int]] = defaultdict(list)
    for partition, offset in at_offset:
        known_offsets[partition].append(offset)
    for partition in known_offsets:
        known_offsets[partition].sort()
    _check_poll_order(ops, known_offsets, anomalies)

    # lost-write / unseen, and where the losses sit. A completed drain read its partition to
    # the end after the heal, so it is the final word: an acked value it lacks is lost even
    # if a consumer saw it earlier (the log forgot it, e.g. truncated by an unclean leader).
    drained: dict[int, set[Any]] = {}
    for o in ops:
        if o.f == "drain" and o.type == "ok" and o.partition is not None:
            drained[o.partition] = {v for _, _, v in (o.value or ())}
    per_partition: dict[int, list[tuple[int, Any, bool]]] = defaultdict(list)  # (offset, value, present)
    for process, value in acked_order:
        send = sends[value]
        final = drained.get(send.partition) if send.partition is not None else None
        present = value in final if final is not None else value in polled_values
        if send.partition is not None and send.offset is not None:
            per_partition[send.partition].append((send.offset, value, present))
        if present:
            continue
        case = {"value": value, "partition": send.partition, "offset": send.offset,
                "process": process, "acked_at": send.done_time,
                "polled_before_drain": value in polled_values}
        if final is not None or (send.offset is not None and send.offset <= max_polled.get(send.partition, -1)):
            anomalies["lost-write"].append(case)
        else:
            anomalies["unseen"].append(case)
    lost = {c["value"] for c in anomalies["lost-write"]}
    for partition, entries in sorted(per_partition.items()):
        entries.sort()
        seen_idx = [i for i, (_, _, present) in enumerate(entries) if present]
        first, last = (seen_idx[0], seen_idx[-1]) if seen_idx else (len(entries), -1)
        for i, (offset, value, _) in enumerate(entries):
            if value not in lost:
                continue
            where = "lost-prefix" if i < first else "lost-postfix" if i > last else "lost-middle"
            anomalies[where].append({"value": value, "partition": partition, "offset": offset})

    anomalies["undetected-corruption"] = _undetected_corruptions(ops)
    stats = _stats(ops, sends, acked_order, first_seen)
    valid = not any(anomalies[name] for name in forbidden)
    return CheckResult(valid, anomalies, frozenset(forbidden), stats)


def _assignment_epochs(ops: Sequence[Op]) -> dict[tuple[Any, int], list[int]]:
    """(consumer, partition) -> the assignment epochs at which it was newly assigned, from the
    group-mode assign ops ({"partitions": [...], "epoch": e})."""
    out: dict[tuple[Any, int], list[int]] = defaultdict(list)
    for o in ops:
        if o.f == "assign" and o.type == "ok" and isinstance(o.value, dict) and o.value.get("epoch") is not None:
            for partition in o.value.get("partitions", ()):
                out[(o.process, partition)].append(o.value["epoch"])
    for epochs in out.values():
        epochs.sort()
    return out


def _check_poll_order(ops: Sequence[Op], known_offsets: dict[int, list[int]],
                      anomalies: dict[str, list[dict[str, Any]]]) -> None:
    """A consumer reads each partition in log order, without gaps, for as long as it holds it.

    Going back or skipping ahead is allowed only across a new assignment of that partition to
    that consumer: an assign op naming it (assign mode: in history order), or in group mode a
    poll whose assignment epoch differs from the previous poll's. The assignment epoch of a
    group poll for a partition is the latest epoch <= the poll's `epoch` at which the consumer
    was newly given the partition; a partition it kept across a rebalance keeps its epoch, so
    a rebalance alone excuses nothing.
    """
    group_epochs = _assignment_epochs(ops)
    order_epoch: dict[tuple[Any, int], int] = defaultdict(int)  # assign-mode resets seen so far
    last_polled: dict[tuple[Any, int], tuple[Any, int]] = {}  # -> (assignment, offset)
    for o in ops:
        if o.process == NEMESIS:
            continue
        if o.f == "assign" and o.type == "ok" and not isinstance(o.value, dict):
            for partition in o.value or ():
                order_epoch[(o.process, partition)] += 1
            continue
        if o.f not in ("poll", "drain") or o.type != "ok" or not o.value:
            continue
        for partition, offset, value in o.value:
            key = (o.process, partition)
            if o.epoch is not None:
                given = [e for e in group_epochs.get(key, ()) if e <= o.epoch]
                assignment: Any = ("group", given[-1] if given else None)
            else:
                assignment = ("order", order_epoch[key])
            prev = last_polled.get(key)
            if prev is not None and prev[0] == assignment:
                before = prev[1]
                where = {"process": o.process, "partition": partition, "previous": before, "offset": offset,
                         "value": value, "time": o.time}
                if o.epoch is not None:
                    where["epoch"] = o.epoch
                if offset <= before:
                    anomalies["nonmonotonic-poll"].append(where)
                elif offset > before + 1:
                    skipped = _between(known_offsets[partition], before, offset)
                    if skipped:
                        anomalies["poll-skip"].append({**where, "skipped": skipped[:10],
                                                       "skipped_count": len(skipped)})
            last_polled[key] = (assignment, offset)


def _undetected_corruptions(ops: Sequence[Op]) -> list[dict[str, Any]]:
    """Segment corruptions (nemesis `corrupt`) the corrupted node never reported."""
    out = []
    for o in ops:
        if (o.process == NEMESIS and o.f == "corrupt" and isinstance(o.value, dict)
                and o.value.get("phase") == "checked" and not o.value.get("detected")):
            out.append({k: v for k, v in o.value.items() if k != "phase"})
    return out


def _between(sorted_offsets: list[int], low: int, high: int) -> list[int]:
    from bisect import bisect_left, bisect_right

    return sorted(set(sorted_offsets[bisect_right(sorted_offsets, low):bisect_left(sorted_offsets, high)]))


def _stats(ops: list[Op], sends: dict[Any, _Send], acked_order: list[tuple[Any, Any]],
           first_seen: dict[Any, float]) -> dict[str, Any]:
    outcomes = defaultdict(int)
    for send in sends.values():
        outcomes[send.outcome] += 1
    worst_lag, worst_value = 0.0, None
    for _, value in acked_order:
        send = sends[value]
        if value in first_seen and send.done_time is not None:
            lag = max(0.0, first_seen[value] - send.done_time)
            if lag > worst_lag:
                worst_lag, worst_value = lag, value
    # Longest window with no successful send, over the time sends were being attempted.
    invokes = [s.invoke_time for s in sends.values()]
    ok_times = sorted(s.done_time for s in sends.values() if s.outcome == "ok" and s.done_time is not None)
    unavailable, window = 0.0, None
    if invokes:
        last_attempt = max([s.done_time or s.invoke_time for s in sends.values()] + invokes)
        marks = [min(invokes), *ok_times, last_attempt]
        for a, b in zip(marks, marks[1:], strict=False):
            if b - a > unavailable:
                unavailable, window = b - a, [round(a, 3), round(b, 3)]
    polls = sum(1 for o in ops if o.f in ("poll", "drain") and o.type == "ok")
    return {
        "sends": len(sends), "acknowledged": outcomes["ok"], "failed": outcomes["fail"],
        "indeterminate": outcomes["info"] + outcomes["invoke"], "polls": polls,
        "values_polled": len(first_seen),
        "worst_lag_s": round(worst_lag, 3), "worst_lag_value": worst_value,
        "longest_unavailability_s": round(unavailable, 3), "unavailability_window": window,
    }
