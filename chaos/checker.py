"""The queue checker: pure functions from a history to the anomalies of the chaos design
(the anomaly names are Jepsen's queue and Kafka checker's).

Laid out as Jepsen's checkers are: one pass, `analyse`, builds the indexes every anomaly
needs (sends by value, claims per log position, what was read, the final drains, the
consecutive reads of each consumer); then one pure function per anomaly takes that
`Analysis` and returns its cases; `check` runs them all (the `FINDERS` table) and gives
the verdict.

No clocks, no I/O: everything it knows comes from the ops (see chaos/history.py).
Each anomaly is a list of cases (plain dicts, JSON-ready) so a report can show
examples; `valid` is false as soon as a *forbidden* anomaly has a case.
Duplicates are only forbidden for idempotent producers (Kafka promises
nothing about retried non-idempotent sends). Besides the queue anomalies,
`undetected-corruption` lists segment corruptions (the `corrupt` nemesis)
that the corrupted node never reported detecting on restart.

The metadata anomalies judge the metadata ops of chaos/metadata_probe.py and
chaos/metadata_workload.py (all forbidden):
- `metadata-divergence`: two voters reported different image digests at one offset, or the
  quorum did not settle after the heal (one leader, one image offset and digest on every voter);
- `lost-topic-change`: an acknowledged topic creation missing, or an acknowledged deletion
  present, in a node's final metadata;
- `leader-epoch-regression`: a node reported a partition's leader epoch lower than it had
  reported before (within one process incarnation: a restarted node replays its log from
  its files and catches up from the leader);
- `quorum-critical`: a CRITICAL line in a node's log (pysyncobj's "truncating already-applied
  log entries", for one).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from raftka.chaos.history import NEMESIS, Op

ANOMALIES = (
    "lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a", "nonmonotonic-send",
    "nonmonotonic-poll", "poll-skip", "unexpected", "lost-prefix", "lost-middle", "lost-postfix",
    "undetected-corruption", "metadata-divergence", "lost-topic-change", "leader-epoch-regression",
    "quorum-critical", "undrained",
)
# lost-prefix/middle/postfix classify lost-write cases; they add no verdict of their own.
ALWAYS_FORBIDDEN = frozenset({
    "lost-write", "unseen", "inconsistent-offsets", "G1a", "nonmonotonic-send", "nonmonotonic-poll",
    "poll-skip", "unexpected", "undetected-corruption", "metadata-divergence", "lost-topic-change",
    "leader-epoch-regression", "quorum-critical", "undrained",
})
EXAMPLES = 8  # cases kept per anomaly in the summary (all are counted)

Case = dict[str, Any]
Process = int | str


@dataclass(frozen=True)
class CheckResult:
    valid: bool
    anomalies: dict[str, list[Case]]
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
class Send:
    """One value's send: where it went and how it ended."""

    process: Process
    partition: int | None
    invoke_time: float
    outcome: str = "invoke"  # ok / fail / info, or still "invoke" if never completed
    offset: int | None = None
    done_time: float | None = None


@dataclass(frozen=True)
class PollStep:
    """Two consecutive reads of one partition by one consumer within one assignment:
    `previous` then `offset`. Nonmonotonic and skipping reads are such steps."""

    process: Process
    partition: int
    previous: int
    offset: int
    value: Any
    time: float
    epoch: int | None  # the poll's assignment epoch (group mode), None in assign mode

    def case(self) -> Case:
        where: Case = {"process": self.process, "partition": self.partition, "previous": self.previous,
                       "offset": self.offset, "value": self.value, "time": self.time}
        if self.epoch is not None:
            where["epoch"] = self.epoch
        return where


@dataclass(frozen=True)
class MetadataIndex:
    """The metadata ops of a history, in history order."""

    topic_changes: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> f -> outcome
    node_metadata: list[Op] = field(default_factory=list)  # f "node-metadata"
    quorum_status: list[Op] = field(default_factory=list)  # f "quorum-status"
    final: list[Op] = field(default_factory=list)  # f "metadata-final": did the images converge
    log_scans: list[Op] = field(default_factory=list)  # f "log-scan"


def _metadata_index(ops: Sequence[Op]) -> MetadataIndex:
    index = MetadataIndex()
    lists = {"node-metadata": index.node_metadata, "quorum-status": index.quorum_status,
             "metadata-final": index.final, "log-scan": index.log_scans}
    for o in ops:
        if o.f in ("create-topic", "delete-topic") and isinstance(o.value, str):
            index.topic_changes.setdefault(o.value, {})[o.f] = o.type
        elif o.f in lists and isinstance(o.value, dict):
            lists[o.f].append(o)
    return index


@dataclass(frozen=True)
class Analysis:
    """The indexes the anomaly functions share, built once by `analyse`."""

    ops: tuple[Op, ...]
    idempotent: bool
    sends: dict[Any, Send]  # value -> its (last) send
    acked: list[tuple[Process, Any]]  # (process, value) of acknowledged sends, in completion order
    claims: dict[tuple[int, int], dict[Any, list[str]]]  # (partition, offset) -> value -> who put it there
    polled: set[Any]  # every value a poll or drain returned
    first_seen: dict[Any, float]  # value -> time of the first read that returned it
    max_polled: dict[int, int]  # partition -> highest offset read
    drained: dict[int, set[Any]]  # partition -> values of its completed final drain
    known_offsets: dict[int, list[int]]  # partition -> every offset claimed, sorted
    poll_steps: list[PollStep]  # in history order
    metadata: MetadataIndex = field(default_factory=MetadataIndex)

    def read_finally(self, value: Any, send: Send) -> bool:
        """Whether the last word on `send`'s partition has `value`: its drain if it was
        drained (a drain read to the end after the heal), else any read at all."""
        final = self.final_read(send)
        return value in final if final is not None else value in self.polled

    def final_read(self, send: Send) -> set[Any] | None:
        return self.drained.get(send.partition) if send.partition is not None else None


def _is_idempotent(ops: Sequence[Op]) -> bool:
    for o in ops:
        if o.f == "config" and isinstance(o.value, dict):
            return bool(o.value.get("idempotence"))
    return False


def _reads(o: Op) -> bool:
    """A completed poll or drain that returned records."""
    return o.f in ("poll", "drain") and o.type == "ok" and bool(o.value)


class _Indexer:
    """The one pass over the ops that `analyse` makes, op by op in history order."""

    def __init__(self) -> None:
        self.sends: dict[Any, Send] = {}
        self.pending: dict[Process, Any] = {}  # process -> value of its outstanding send
        self.acked: list[tuple[Process, Any]] = []
        self.claims: dict[tuple[int, int], dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.first_seen: dict[Any, float] = {}
        self.polled: set[Any] = set()
        self.max_polled: dict[int, int] = {}
        self.drained: dict[int, set[Any]] = {}

    def add(self, o: Op) -> None:
        if o.f == "drain" and o.type == "ok" and o.partition is not None:
            self.drained[o.partition] = {v for _, _, v in (o.value or ())}
        if o.process == NEMESIS:
            return
        if o.f == "send":
            self._send(o)
        elif _reads(o):
            self._read(o)

    def _send(self, o: Op) -> None:
        if o.type == "invoke":
            self.sends[o.value] = Send(o.process, o.partition, o.time)
            self.pending[o.process] = o.value
            return
        value = o.value if o.value is not None else self.pending.get(o.process)
        self.pending.pop(o.process, None)
        send = self.sends.get(value)
        if send is None:
            return
        send.outcome, send.done_time = o.type, o.time
        if o.type == "ok":
            send.partition = o.partition if o.partition is not None else send.partition
            send.offset = o.offset if o.offset is not None and o.offset >= 0 else None
            self.acked.append((o.process, value))
            if send.partition is not None and send.offset is not None:
                self.claims[(send.partition, send.offset)][value].append("send")

    def _read(self, o: Op) -> None:
        for partition, offset, value in o.value:
            self.claims[(partition, offset)][value].append(f"poll:{o.process}")
            self.polled.add(value)
            self.first_seen.setdefault(value, o.time)
            self.max_polled[partition] = max(self.max_polled.get(partition, -1), offset)

    def known_offsets(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for partition, offset in self.claims:
            out[partition].append(offset)
        for offsets in out.values():
            offsets.sort()
        return out


def analyse(history: Iterable[Op], *, idempotent: bool | None = None) -> Analysis:
    """Index a history. `idempotent` defaults to the history's config op (f="config")."""
    ops = tuple(history)
    index = _Indexer()
    for o in ops:
        index.add(o)
    return Analysis(
        ops=ops, idempotent=_is_idempotent(ops) if idempotent is None else idempotent,
        sends=index.sends, acked=index.acked, claims=index.claims, polled=index.polled,
        first_seen=index.first_seen, max_polled=index.max_polled, drained=index.drained,
        known_offsets=index.known_offsets(), poll_steps=_poll_steps(ops), metadata=_metadata_index(ops))


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


def _poll_steps(ops: Sequence[Op]) -> list[PollStep]:
    """A consumer reads each partition in log order, without gaps, for as long as it holds it:
    these are its consecutive reads that must obey that.

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
    steps: list[PollStep] = []
    for o in ops:
        if o.process == NEMESIS:
            continue
        if o.f == "assign" and o.type == "ok" and not isinstance(o.value, dict):
            for partition in o.value or ():
                order_epoch[(o.process, partition)] += 1
            continue
        if not _reads(o):
            continue
        for partition, offset, value in o.value:
            key = (o.process, partition)
            assignment = _assignment(o, key, group_epochs, order_epoch)
            prev = last_polled.get(key)
            if prev is not None and prev[0] == assignment:
                steps.append(PollStep(o.process, partition, prev[1], offset, value, o.time, o.epoch))
            last_polled[key] = (assignment, offset)
    return steps


def _assignment(o: Op, key: tuple[Any, int], group_epochs: dict[tuple[Any, int], list[int]],
                order_epoch: dict[tuple[Any, int], int]) -> tuple[str, int | None]:
    """Which assignment of partition key[1] to consumer key[0] the read `o` happened in."""
    if o.epoch is not None:
        given = [e for e in group_epochs.get(key, ()) if e <= o.epoch]
        return ("group", given[-1] if given else None)
    return ("order", order_epoch[key])


# --- one function per anomaly ------------------------------------------------------------


def unexpected_cases(a: Analysis) -> list[Case]:
    """Values read that nobody sent."""
    return [{"value": value} for value in sorted(a.polled, key=repr) if a.sends.get(value) is None]


def g1a_cases(a: Analysis) -> list[Case]:
    """Aborted read: values read whose send definitely failed."""
    out = []
    for value in sorted(a.polled, key=repr):
        send = a.sends.get(value)
        if send is not None and send.outcome == "fail":
            out.append({"value": value, "partition": send.partition})
    return out


def inconsistent_offset_cases(a: Analysis) -> list[Case]:
    """Log positions claimed (by the send's ack or by reads) for more than one value."""
    return [{"partition": partition, "offset": offset,
             "values": {repr(v): sorted(set(who)) for v, who in claims.items()}}
            for (partition, offset), claims in sorted(a.claims.items()) if len(claims) > 1]


def duplicate_cases(a: Analysis) -> list[Case]:
    """Values found at more than one log position."""
    positions: dict[Any, set[tuple[int, int]]] = defaultdict(set)
    for position, claims in sorted(a.claims.items()):
        for value in claims:
            positions[value].add(position)
    return [{"value": value, "at": sorted(where)}
            for value, where in sorted(positions.items(), key=lambda kv: repr(kv[0])) if len(where) > 1]


def nonmonotonic_send_cases(a: Analysis) -> list[Case]:
    """One process's successive acknowledged sends to a partition got offsets that do not grow."""
    out = []
    last_sent: dict[tuple[Any, int], tuple[int, Any]] = {}
    for process, value in a.acked:
        send = a.sends[value]
        if send.partition is None or send.offset is None:
            continue
        key = (process, send.partition)
        prev = last_sent.get(key)
        if prev is not None and send.offset <= prev[0]:
            out.append({"process": process, "partition": send.partition,
                        "previous": {"offset": prev[0], "value": prev[1]},
                        "next": {"offset": send.offset, "value": value}})
        last_sent[key] = (send.offset, value)
    return out


def nonmonotonic_poll_cases(a: Analysis) -> list[Case]:
    """A consumer read an offset at or below the one it read before, within one assignment."""
    return [step.case() for step in a.poll_steps if step.offset <= step.previous]


def poll_skip_cases(a: Analysis) -> list[Case]:
    """A consumer jumped over offsets that hold values, within one assignment."""
    out = []
    for step in a.poll_steps:
        if step.offset > step.previous + 1:
            skipped = _between(a.known_offsets[step.partition], step.previous, step.offset)
            if skipped:
                out.append({**step.case(), "skipped": skipped[:10], "skipped_count": len(skipped)})
    return out


def _unread_acked(a: Analysis) -> Iterator[tuple[Case, bool]]:
    """Each acknowledged send the final reads lack, as (case, lost). A completed drain read its
    partition to the end after the heal, so it is the final word: an acked value it lacks is
    lost even if a consumer saw it earlier (the log forgot it, e.g. truncated by an unclean
    leader). Without a drain, a value is lost when a read went past its offset, else unseen."""
    for process, value in a.acked:
        send = a.sends[value]
        if a.read_finally(value, send):
            continue
        case = {"value": value, "partition": send.partition, "offset": send.offset,
                "process": process, "acked_at": send.done_time,
                "polled_before_drain": value in a.polled}
        lost = a.final_read(send) is not None or (
            send.offset is not None and send.offset <= a.max_polled.get(send.partition, -1))
        yield case, lost


def lost_write_cases(a: Analysis) -> list[Case]:
    """Acknowledged values missing from the log although later offsets were read (or drained)."""
    return [case for case, lost in _unread_acked(a) if lost]


def unseen_cases(a: Analysis) -> list[Case]:
    """Acknowledged values never read, with nothing read past them either."""
    return [case for case, lost in _unread_acked(a) if not lost]


def _lost_positions(a: Analysis) -> Iterator[tuple[str, Case]]:
    """Where each lost write sits among its partition's acknowledged writes: before the first
    one read (lost-prefix), after the last one read (lost-postfix), or between (lost-middle)."""
    lost = {case["value"] for case in lost_write_cases(a)}
    per_partition: dict[int, list[tuple[int, Any, bool]]] = defaultdict(list)  # (offset, value, present)
    for _, value in a.acked:
        send = a.sends[value]
        if send.partition is not None and send.offset is not None:
            per_partition[send.partition].append((send.offset, value, a.read_finally(value, send)))
    for partition, entries in sorted(per_partition.items()):
        entries.sort()
        seen_idx = [i for i, (_, _, present) in enumerate(entries) if present]
        first, last = (seen_idx[0], seen_idx[-1]) if seen_idx else (len(entries), -1)
        for i, (offset, value, _) in enumerate(entries):
            if value in lost:
                where = "lost-prefix" if i < first else "lost-postfix" if i > last else "lost-middle"
                yield where, {"value": value, "partition": partition, "offset": offset}


def lost_prefix_cases(a: Analysis) -> list[Case]:
    return [case for where, case in _lost_positions(a) if where == "lost-prefix"]


def lost_middle_cases(a: Analysis) -> list[Case]:
    return [case for where, case in _lost_positions(a) if where == "lost-middle"]


def lost_postfix_cases(a: Analysis) -> list[Case]:
    return [case for where, case in _lost_positions(a) if where == "lost-postfix"]


def undetected_corruption_cases(a: Analysis) -> list[Case]:
    """Segment corruptions (nemesis `corrupt`) the corrupted node never reported."""
    out = []
    for o in a.ops:
        if (o.process == NEMESIS and o.f == "corrupt" and isinstance(o.value, dict)
                and o.value.get("phase") == "checked" and not o.value.get("detected")):
            out.append({k: v for k, v in o.value.items() if k != "phase"})
    return out


def metadata_divergence_cases(a: Analysis) -> list[Case]:
    """Voters whose images differ at one offset (any sample), and a final state in which the
    voters did not reach one offset and digest after the heal."""
    seen: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))  # offset -> digest -> nodes
    for o in a.metadata.quorum_status:
        for v in o.value.get("voters", ()):
            if v.get("image_digest") and v.get("image_digest_offset") is not None:
                seen[v["image_digest_offset"]][v["image_digest"]].add(v.get("node_id"))
    out: list[Case] = [{"offset": offset, "digests": {d[:16]: sorted(nodes) for d, nodes in sorted(digests.items())}}
                       for offset, digests in sorted(seen.items()) if len(digests) > 1]
    for o in a.metadata.final:
        if not o.value.get("converged"):
            out.append({"after_heal": "the quorum did not settle: one leader, and one image offset and digest "
                                      "on every voter",
                        "voters": {v.get("node_id"): [v.get("image_offset"), (v.get("image_digest") or "")[:16]]
                                   for v in o.value.get("voters") or ()},
                        "missing_nodes": o.value.get("missing_nodes", [])})
    return out


def lost_topic_change_cases(a: Analysis) -> list[Case]:
    """Acknowledged topic creations absent, or acknowledged deletions present, in a node's last
    final metadata (a name is created once; one whose deletion was attempted is not required)."""
    final: dict[int, set[str]] = {}
    for o in a.metadata.node_metadata:
        if o.value.get("final"):
            final[o.value["node"]] = set(o.value.get("topics") or ())
    out: list[Case] = []
    for topic, changes in sorted(a.metadata.topic_changes.items()):
        if changes.get("create-topic") == "ok" and "delete-topic" not in changes:
            out += [{"topic": topic, "change": "create", "node": node, "found": False}
                    for node, names in sorted(final.items()) if topic not in names]
        if changes.get("delete-topic") == "ok":
            out += [{"topic": topic, "change": "delete", "node": node, "found": True}
                    for node, names in sorted(final.items()) if topic in names]
    return out


def leader_epoch_regression_cases(a: Analysis) -> list[Case]:
    """A node (one process incarnation) reported a partition's leader epoch below an earlier one."""
    last: dict[tuple[Any, Any, str, Any], tuple[int, float]] = {}
    out: list[Case] = []
    for o in a.metadata.node_metadata:
        node, pid = o.value.get("node"), o.value.get("pid")
        for topic, partitions in sorted((o.value.get("topics") or {}).items()):
            for partition, epoch in sorted(partitions.items()):
                if not isinstance(epoch, int) or epoch < 0:
                    continue
                key = (node, pid, topic, partition)
                previous = last.get(key)
                if previous is not None and epoch < previous[0]:
                    out.append({"node": node, "pid": pid, "topic": topic, "partition": partition, "epoch": epoch,
                                "time": o.time, "previous": {"epoch": previous[0], "time": previous[1]}})
                if previous is None or epoch >= previous[0]:
                    last[key] = (epoch, o.time)
    return out


def quorum_critical_cases(a: Analysis) -> list[Case]:
    """CRITICAL lines in the nodes' logs."""
    return [{"node": o.value.get("node"), "line": line}
            for o in a.metadata.log_scans for line in o.value.get("critical") or ()]


def undrained_cases(a: Analysis) -> list[Case]:
    """Final drains that did not read every partition to its end after the heal. Without them the
    checker can only say that an acknowledged value was read at some time, not that the log still
    has it, so a run that cannot drain is not valid (it also means the healed cluster could not
    serve its own data)."""
    return [{"time": o.time, "error": o.error, "value": o.value}
            for o in a.ops if o.f == "drain" and o.type in ("info", "fail")]


FINDERS: dict[str, Callable[[Analysis], list[Case]]] = {
    "lost-write": lost_write_cases,
    "unseen": unseen_cases,
    "duplicate": duplicate_cases,
    "inconsistent-offsets": inconsistent_offset_cases,
    "G1a": g1a_cases,
    "nonmonotonic-send": nonmonotonic_send_cases,
    "nonmonotonic-poll": nonmonotonic_poll_cases,
    "poll-skip": poll_skip_cases,
    "unexpected": unexpected_cases,
    "lost-prefix": lost_prefix_cases,
    "lost-middle": lost_middle_cases,
    "lost-postfix": lost_postfix_cases,
    "undetected-corruption": undetected_corruption_cases,
    "metadata-divergence": metadata_divergence_cases,
    "lost-topic-change": lost_topic_change_cases,
    "leader-epoch-regression": leader_epoch_regression_cases,
    "quorum-critical": quorum_critical_cases,
    "undrained": undrained_cases,
}
assert tuple(FINDERS) == ANOMALIES


def forbidden_anomalies(a: Analysis) -> frozenset[str]:
    """Duplicates are forbidden only with idempotent producers."""
    return ALWAYS_FORBIDDEN | ({"duplicate"} if a.idempotent else frozenset())


def check(history: Iterable[Op], *, idempotent: bool | None = None) -> CheckResult:
    """Check a queue history. `idempotent` defaults to the history's config op (f="config")."""
    a = analyse(history, idempotent=idempotent)
    anomalies = {name: find(a) for name, find in FINDERS.items()}
    forbidden = forbidden_anomalies(a)
    valid = not any(anomalies[name] for name in forbidden)
    return CheckResult(valid, anomalies, forbidden, stats(a))


def _between(sorted_offsets: list[int], low: int, high: int) -> list[int]:
    return sorted(set(sorted_offsets[bisect_right(sorted_offsets, low):bisect_left(sorted_offsets, high)]))


def stats(a: Analysis) -> dict[str, Any]:
    """Counts, the worst send-to-first-read lag and the longest stretch without a successful send."""
    sends = a.sends
    outcomes: dict[str, int] = defaultdict(int)
    for send in sends.values():
        outcomes[send.outcome] += 1
    worst_lag, worst_value = 0.0, None
    for _, value in a.acked:
        send = sends[value]
        if value in a.first_seen and send.done_time is not None:
            lag = max(0.0, a.first_seen[value] - send.done_time)
            if lag > worst_lag:
                worst_lag, worst_value = lag, value
    # Longest window with no successful send, over the time sends were being attempted.
    invokes = [s.invoke_time for s in sends.values()]
    ok_times = sorted(s.done_time for s in sends.values() if s.outcome == "ok" and s.done_time is not None)
    unavailable, window = 0.0, None
    if invokes:
        last_attempt = max([s.done_time or s.invoke_time for s in sends.values()] + invokes)
        marks = [min(invokes), *ok_times, last_attempt]
        for start, end in zip(marks, marks[1:], strict=False):
            if end - start > unavailable:
                unavailable, window = end - start, [round(start, 3), round(end, 3)]
    polls = sum(1 for o in a.ops if o.f in ("poll", "drain") and o.type == "ok")
    return {
        "sends": len(sends), "acknowledged": outcomes["ok"], "failed": outcomes["fail"],
        "indeterminate": outcomes["info"] + outcomes["invoke"], "polls": polls,
        "values_polled": len(a.first_seen),
        "worst_lag_s": round(worst_lag, 3), "worst_lag_value": worst_value,
        "longest_unavailability_s": round(unavailable, 3), "unavailability_window": window,
        **metadata_stats(a),
    }


def metadata_stats(a: Analysis) -> dict[str, Any]:
    m = a.metadata
    outcomes = defaultdict(int)
    for changes in m.topic_changes.values():
        for f, outcome in changes.items():
            outcomes[f"{f}-{outcome}"] += 1
    return {"topic_changes": dict(sorted(outcomes.items())), "node_metadata_samples": len(m.node_metadata),
            "quorum_status_samples": len(m.quorum_status),
            "digests_compared": sum(1 for o in m.quorum_status for v in o.value.get("voters", ())
                                    if v.get("image_digest"))}
