"""Data-driven scenarios for broker/group/share_partition_state.py (etcd-raft's `testdata/*.txt` style).

The files under testdata/share_partition/ follow tests/scenario.py; each
command runs against one `SharePartitionState` and prints its effects, then the state:
`state: spso=.. speo=.. next_fetch=.. in_flight=..` and one line per run of records with
the same state, delivery count, member and lock deadline.

Commands (times in ms):

- `init start=10 [lock=30000] [locks=2000] [limit=5] [renew=1|0] [dlq=0|1]`: a share partition
  whose SPSO is `start` (`lock`: group.share.record.lock.duration.ms, `locks`:
  group.share.partition.max.record.locks, `limit`: group.share.delivery.count.limit,
  `renew`: share.renew.acknowledge.enable, `dlq`: the group has a dead-letter queue topic).
- `init reset=latest|earliest|by_duration:P1D log_start=0 log_end=10 [at=5] ...`: the SPSO from
  share.auto.offset.reset (`at`: the offset the time index gave for the duration).
- `acquire member=m1 to=19 now=0 [from=...] [max=500]`: the log returned offsets `from`
  (default: the next fetch offset) .. `to`; prints the acquired ranges.
- `ack member=m1 now=0 batches=10-12:accept,13:release,14-15:accept.reject`: one
  acknowledgement request (a type per batch, or one per offset joined by dots; types:
  gap accept release reject renew, or a number).
- `acquire ... fetch=N`: the log was read from offset N (records missing before `from` were
  compacted away).
- `persist`: the batches the share coordinator would keep; `restart`: a new state loaded from
  them (a leader restart); `load start=10 batches=10-12:acknowledged:1,15-16:available:2`: a
  state loaded from given batches.
- `aborted member=m1 acquired=10-14:1 spans=11-12`: read_committed archives the acquired
  offsets in aborted transactions' batches; prints the acquired ranges left.
- `expire now=...`, `leave member=m1`, `log_start offset=...`, `show`.
- `dlq_take`: the ARCHIVING runs handed to the shell for the dead-letter queue;
  `dlq_done first=12 last=14`: their DLQ write ended (ARCHIVED now).
"""

from __future__ import annotations

from pathlib import Path

from raftka.broker.group.share_partition_state import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    Outcome,
    PersistedBatch,
    RecordState,
    ShareConfig,
    SharePartitionState,
    start_offset_for_reset,
)
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "share_partition"


def _ack_type(name: str) -> int:
    return int(name) if name.lstrip("-").isdigit() else int(AcknowledgeType[name.upper()])


def _batches(spec: str) -> list[AcknowledgementBatch]:
    out = []
    for part in spec.split(","):
        offsets, types = part.split(":")
        first, _, last = offsets.partition("-")
        out.append(AcknowledgementBatch(int(first), int(last or first),
                                        tuple(_ack_type(t) for t in types.split("."))))
    return out


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.state: SharePartitionState | None = None

    def _state(self) -> SharePartitionState:
        assert self.state is not None, "init first"
        return self.state

    def _state_lines(self) -> list[str]:
        s = self._state()
        lines = [f"state: spso={s.start_offset} speo={s.end_offset} next_fetch={s.next_fetch_offset()} "
                 f"in_flight={s.in_flight_count}"]
        runs: list[list] = []
        for offset, r in s.records.items():
            key = (r.state.name, r.delivery_count, r.member_id, r.lock_deadline_ms)
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == key:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, key])
        for first, last, (state, count, member, deadline) in runs:
            span = f"{first}" if first == last else f"{first}-{last}"
            extra = (f" {member}" if member else "") + (f" until={deadline}" if deadline is not None else "")
            lines.append(f"  {span} {state} dc={count}{extra}")
        return lines

    def _outcome(self, outcome: Outcome) -> str:
        head = []
        if outcome.error:
            head.append(f"error {outcome.error}: {outcome.reason}")
        if outcome.released:
            head.append("released")
        if outcome.start_offset_moved:
            head.append("spso moved")
        return "\n".join((head or ["no effects"]) + self._state_lines())

    def cmd_init(self, kv) -> str:
        config = ShareConfig(record_lock_duration_ms=int(kv.get("lock", 30000)),
                             max_record_locks=int(kv.get("locks", 2000)),
                             delivery_count_limit=int(kv.get("limit", 5)),
                             renew_acknowledge_enabled=kv.get("renew", "1") == "1",
                             dlq_enabled=kv.get("dlq", "0") == "1")
        if "reset" in kv:
            at = int(kv["at"]) if "at" in kv else None
            try:
                start = start_offset_for_reset(kv["reset"], int(kv["log_start"]), int(kv["log_end"]), at)
            except ValueError as exc:
                return f"error: {exc}"
        else:
            start = int(kv["start"])
        self.state = SharePartitionState(start, config)
        return "\n".join(self._state_lines())

    def cmd_acquire(self, kv) -> str:
        s = self._state()
        first = int(kv["from"]) if "from" in kv else s.next_fetch_offset()
        fetch = int(kv["fetch"]) if "fetch" in kv else None
        got = s.acquire(kv["member"], first, int(kv["to"]), int(kv["now"]), int(kv.get("max", 500)), fetch)
        head = [f"acquired {a.first_offset}-{a.last_offset} dc={a.delivery_count}" for a in got] or ["acquired none"]
        return "\n".join(head + self._state_lines())

    def cmd_aborted(self, kv) -> str:
        """`aborted member=m1 acquired=10-14:1 spans=11-12`: read_committed's archive of the
        acquired offsets in aborted transactions' batches."""
        acquired = []
        for part in kv["acquired"].split(","):
            offsets, count = part.split(":")
            first, _, last = offsets.partition("-")
            acquired.append(AcquiredRecords(int(first), int(last or first), int(count)))
        spans = []
        for part in kv.get("spans", "").split(","):
            if part:
                first, _, last = part.partition("-")
                spans.append((int(first), int(last or first)))
        got = self._state().archive_aborted(kv["member"], tuple(acquired), spans)
        head = [f"acquired {a.first_offset}-{a.last_offset} dc={a.delivery_count}" for a in got] or ["acquired none"]
        return "\n".join(head + self._state_lines())

    def cmd_ack(self, kv) -> str:
        return self._outcome(self._state().acknowledge(kv["member"], _batches(kv["batches"]), int(kv["now"])))

    def cmd_expire(self, kv) -> str:
        s = self._state()
        deadline = s.next_lock_deadline()
        head = f"next lock deadline: {deadline}\n"
        return head + self._outcome(s.expire_locks(int(kv["now"])))

    def cmd_leave(self, kv) -> str:
        return self._outcome(self._state().release_member(kv["member"]))

    def cmd_log_start(self, kv) -> str:
        return self._outcome(self._state().advance_log_start(int(kv["offset"])))

    def cmd_persist(self, kv) -> str:
        batches = self._state().persisted_batches()
        return "\n".join([f"{b.first_offset}-{b.last_offset} {b.state.name} dc={b.delivery_count}" for b in batches]
                         or ["no batches"])

    def cmd_restart(self, kv) -> str:
        s = self._state()
        self.state = SharePartitionState.load(s.start_offset, list(s.persisted_batches()), s.config)
        return "\n".join(self._state_lines())

    def cmd_load(self, kv) -> str:
        batches = []
        for part in kv.get("batches", "").split(","):
            if part:
                offsets, state, count = part.split(":")
                first, _, last = offsets.partition("-")
                batches.append(PersistedBatch(int(first), int(last or first), RecordState[state.upper()], int(count)))
        try:
            self.state = SharePartitionState.load(int(kv["start"]), batches, self._state().config)
        except ValueError as exc:
            return f"error: {exc}"
        return "\n".join(self._state_lines())

    def cmd_dlq_take(self, kv) -> str:
        runs = self._state().take_dlq_runs()
        head = [f"dlq {r.first_offset}-{r.last_offset} dc={r.delivery_count} {r.reason.name}" for r in runs]
        return "\n".join((head or ["dlq none"]) + self._state_lines())

    def cmd_dlq_done(self, kv) -> str:
        return self._outcome(self._state().finish_dlq(int(kv["first"]), int(kv["last"])))

    def cmd_show(self, kv) -> str:
        s = self._state()
        return "\n".join([f"can acquire: {s.can_acquire()}"] + self._state_lines())


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=5)
