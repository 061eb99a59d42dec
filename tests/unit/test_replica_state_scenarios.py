"""Data-driven scenarios for broker/replication/replica_state.py (etcd-raft's `testdata/*.txt` style).

Each file under testdata/replica_state/ is a sequence of blocks:

    # comments
    command key=value ...
    ----
    expected output (effects, then the state)
    <blank line>

The interpreter runs each command against one `ReplicaState` and compares what it
prints with the expected block. To rewrite the expectations from the code's
output (then review the diff), run with RAFTKA_TESTDATA_REWRITE=1.

Commands (times in ms; lists are comma-separated broker ids, `-` for none):

- `init local=1 lag=30000 [hw=0] [leo=0]`: a new replica (the local log ends at `leo`).
- `apply leader=1 epoch=1 isr=1,2,3 [replicas=...] [pepoch=0] [min_isr=1] [ineligible=3] now=0`:
  a metadata image (replicas default to the ISR; `ineligible`: replicas whose broker is
  fenced or unregistered, none by default). The interpreter keeps the log's leader-epoch cache
  as the shell does: the epoch starts where it already starts if it is the latest, else at
  the log end.
- `commit_isr isr=... [ineligible=...] now=...`: the controller committed an ISR change (same
  leader and leader epoch, partition epoch + 1; `ineligible` unchanged unless given).
- `eligibility ineligible=... now=...`: a broker was fenced or unfenced: the same partition
  (same epochs) with a new ineligible set.
- `append n=... now=...`: the leader appends n records.
- `fetch replica=2 offset=10 now=...`: a follower's fetch.
- `isr_changes now=...`: the periodic ISR check.
- `alter_failed isr=... now=...`: the controller refused that change.
- `check_append [acks=-1]`, `check_replicated`: the min.insync.replicas checks.
- `leader_hw hw=... [leo=...]`, `truncate leo=...`: follower side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from raftka.broker.replication.replica_state import (
    AlterIsr,
    BecameFollower,
    BecameLeader,
    CanJoinIsr,
    FetchBeyondLogEnd,
    HighWatermarkChanged,
    NotAReplica,
    PartitionAssignment,
    ReplicaState,
    StoppedLeading,
)
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "replica_state"


def _ids(value: str) -> tuple[int, ...]:
    return () if value == "-" else tuple(int(v) for v in value.split(","))


def _fmt_ids(ids) -> str:
    return ",".join(str(i) for i in ids) if ids else "-"


def _fmt_effect(effect) -> str:
    match effect:
        case HighWatermarkChanged(old, new):
            return f"hw {old} -> {new}"
        case BecameLeader(epoch, start):
            return f"became leader epoch={epoch} epoch_start={start}"
        case BecameFollower(leader, epoch):
            return f"became follower leader={leader} epoch={epoch}"
        case StoppedLeading(epoch):
            return f"stopped leading epoch={epoch}"
        case CanJoinIsr(replica):
            return f"can join isr: {replica}"
        case FetchBeyondLogEnd(replica, offset, leo):
            return f"fetch beyond log end: replica={replica} offset={offset} leo={leo}"
        case AlterIsr(new_isr, removed, added):
            return f"alter isr -> {_fmt_ids(new_isr)} (removed {_fmt_ids(removed)}, added {_fmt_ids(added)})"
    raise AssertionError(f"unknown effect {effect!r}")


@dataclass
class Harness(CommandHarness):
    state: ReplicaState | None = None
    epochs: list[tuple[int, int]] = field(default_factory=list)  # the log's leader-epoch cache

    def _with_state(self, effects) -> str:
        lines = [_fmt_effect(e) for e in effects] or ["no effects"]
        return "\n".join(lines + self._state_lines())

    def _state_lines(self) -> list[str]:
        s = self.state
        assert s is not None
        role = "leader" if s.is_leader else ("follower" if s.leader >= 0 else "none")
        lines = [f"state: {role} epoch={s.leader_epoch} pepoch={s.partition_epoch} leo={s.log_end_offset} "
                 f"hw={s.high_watermark} epoch_start={s.epoch_start_offset} isr={_fmt_ids(s.isr)} "
                 f"pending={_fmt_ids(s.pending_isr) if s.pending_isr is not None else 'none'}"
                 + (f" ineligible={_fmt_ids(sorted(s.ineligible))}" if s.ineligible else "")]
        for r, f in sorted(s.followers.items()):
            caught = "never" if f.last_caught_up_ms is None else f"{f.last_caught_up_ms:g}"
            fetched = "never" if f.last_fetch_ms is None else f"{f.last_fetch_ms:g}"
            lines.append(f"  follower {r}: leo={f.log_end_offset} caught_up={caught} "
                         f"last_fetch={fetched} last_fetch_leader_leo={f.last_fetch_leader_leo}")
        return lines

    def cmd_init(self, kv) -> str:
        self.state = ReplicaState(int(kv["local"]), float(kv.get("lag", 30000)),
                                  high_watermark=int(kv.get("hw", 0)), log_end_offset=int(kv.get("leo", 0)))
        self.epochs = []
        return "\n".join(self._state_lines())

    def _apply(self, part: PartitionAssignment, min_isr: int, now: float) -> str:
        s = self.state
        assert s is not None
        leo = s.log_end_offset
        start = self.epochs[-1][1] if self.epochs and self.epochs[-1][0] == part.leader_epoch else leo
        effects = s.apply(part, min_insync_replicas=min_isr, now_ms=now, log_end_offset=leo,
                          epoch_start_offset=start)
        for e in effects:
            if isinstance(e, BecameLeader) and not (self.epochs and self.epochs[-1][0] == e.leader_epoch):
                self.epochs = [x for x in self.epochs if x[0] < e.leader_epoch and x[1] < e.epoch_start_offset]
                self.epochs.append((e.leader_epoch, e.epoch_start_offset))
        return self._with_state(effects)

    def cmd_apply(self, kv) -> str:
        isr = _ids(kv["isr"])
        part = PartitionAssignment(_ids(kv.get("replicas", kv["isr"])), isr, int(kv["leader"]), int(kv["epoch"]),
                                   int(kv.get("pepoch", 0)), _ids(kv.get("ineligible", "-")))
        return self._apply(part, int(kv.get("min_isr", 1)), float(kv["now"]))

    def cmd_commit_isr(self, kv) -> str:
        s = self.state
        assert s is not None
        ineligible = _ids(kv["ineligible"]) if "ineligible" in kv else tuple(sorted(s.ineligible))
        part = PartitionAssignment(s.replicas, _ids(kv["isr"]), s.leader, s.leader_epoch, s.partition_epoch + 1,
                                   ineligible)
        return self._apply(part, s.min_insync_replicas, float(kv["now"]))

    def cmd_eligibility(self, kv) -> str:
        s = self.state
        assert s is not None
        part = PartitionAssignment(s.replicas, s.isr, s.leader, s.leader_epoch, s.partition_epoch,
                                   _ids(kv["ineligible"]))
        return self._apply(part, s.min_insync_replicas, float(kv["now"]))

    def cmd_append(self, kv) -> str:
        s = self.state
        assert s is not None
        return self._with_state(s.on_append(s.log_end_offset + int(kv["n"]), float(kv["now"])))

    def cmd_fetch(self, kv) -> str:
        s = self.state
        assert s is not None
        try:
            effects = s.on_fetch(int(kv["replica"]), int(kv["offset"]), float(kv["now"]))
        except NotAReplica as exc:
            return f"error: NotAReplica: {exc}"
        return self._with_state(effects)

    def cmd_isr_changes(self, kv) -> str:
        s = self.state
        assert s is not None
        return self._with_state(s.isr_changes(float(kv["now"])))

    def cmd_alter_failed(self, kv) -> str:
        s = self.state
        assert s is not None
        return self._with_state(s.alter_failed(_ids(kv["isr"]), float(kv["now"])))

    def cmd_check_append(self, kv) -> str:
        s = self.state
        assert s is not None
        refusal = s.append_refusal(int(kv.get("acks", -1)))
        return "ok" if refusal is None else f"NOT_ENOUGH_REPLICAS: {refusal}"

    def cmd_check_replicated(self, kv) -> str:
        s = self.state
        assert s is not None
        refusal = s.replicated_refusal()
        return "ok" if refusal is None else f"NOT_ENOUGH_REPLICAS_AFTER_APPEND: {refusal}"

    def cmd_leader_hw(self, kv) -> str:
        s = self.state
        assert s is not None
        return self._with_state(s.on_leader_high_watermark(int(kv["hw"]), int(kv.get("leo", s.log_end_offset))))

    def cmd_truncate(self, kv) -> str:
        s = self.state
        assert s is not None
        return self._with_state(s.on_truncate(int(kv["leo"])))


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=5)
