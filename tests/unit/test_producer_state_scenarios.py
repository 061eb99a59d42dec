"""Data-driven scenarios for log/producer_state.py (idempotent and transactional producers).

The files under testdata/producer_state/ follow tests/scenario.py. The harness plays one
partition's log: it gives each batch the next offsets, runs the leader's `check` before an
append and `update` after it, as the partition log does, and keeps the headers written so a
`restart` can reload the newest snapshot and replay what follows. Each command prints its
outcome, then the state: `log_end=.. first_unstable=.. ongoing=<first offset>:<pid>,...`
and one line per producer: `pid <id>: epoch=.. batches=<first seq>-<last seq>@<first
offset>-<last offset> ... coordinator_epoch=.. txn_first=..`.

Commands:

- `produce pid=1 epoch=0 seq=0 [n=1] [txn=1] [verify=0]`: a client batch of n records
  (`verify=0`: the coordinator's own write, no sequence check): `append offsets a-b`,
  `duplicate of offsets a-b`, or `error <Exception>: ...`.
- `replicate pid=1 epoch=0 seq=0 [n=1] [txn=1]`: a follower (or recovery) writes a batch
  the leader accepted: no check.
- `marker pid=1 epoch=0 type=commit|abort [coordinator=0]`: a transaction marker.
- `hw offset=..`: the high watermark moved.
- `snapshot`: a snapshot at the log end; `restart`: reload it and replay the rest.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from raftka.log.batch_header import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from raftka.log.control_record import ABORT, COMMIT, ControlRecord
from raftka.log.errors import LogError
from raftka.log.producer_state import ProducerStateManager
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "producer_state"


def _header(pid: int, epoch: int, seq: int, n: int, offset: int, *, txn: bool = False,
            control: bool = False) -> BatchHeader:
    attributes = (ATTR_TRANSACTIONAL if txn or control else 0) | (ATTR_CONTROL if control else 0)
    return BatchHeader(base_offset=offset, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=n - 1, base_timestamp=offset,
                       max_timestamp=offset, producer_id=pid, producer_epoch=epoch,
                       base_sequence=-1 if control else seq, record_count=n)


class Harness(CommandHarness):
    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="producer_state_scenario")
        self.dir = Path(self._tmp.name)
        self.manager = ProducerStateManager(self.dir)
        self.log: list[tuple[BatchHeader, ControlRecord | None]] = []
        self.log_end = 0

    def _state(self) -> list[str]:
        m = self.manager
        unstable = m.first_unstable_offset()
        ongoing = ",".join(f"{o}:{p}" for o, p in sorted(m.ongoing_transactions().items())) or "-"
        lines = [f"log_end={self.log_end} first_unstable={'none' if unstable is None else unstable} "
                 f"ongoing={ongoing}"]
        for pid, e in sorted(m.producers().items()):
            batches = " ".join(f"{a}-{b}@{c}-{d}" for a, b, c, d in e.batches) or "-"
            lines.append(f"  pid {pid}: epoch={e.epoch} batches={batches} coordinator_epoch={e.coordinator_epoch} "
                         f"txn_first={e.current_txn_first_offset}")
        return lines

    def _write(self, header: BatchHeader, control: ControlRecord | None = None) -> list[str]:
        completed = self.manager.update(header, control)
        self.log.append((header, control))
        self.log_end = header.last_offset + 1
        if completed is None:
            return []
        kind = "aborted" if completed.is_aborted else "committed"
        return [f"{kind} transaction of pid {completed.producer_id}: "
                f"offsets {completed.first_offset}-{completed.last_offset}"]

    def _batch(self, kv) -> BatchHeader:
        return _header(int(kv["pid"]), int(kv["epoch"]), int(kv["seq"]), int(kv.get("n", 1)), self.log_end,
                       txn=kv.get("txn") == "1")

    def cmd_produce(self, kv) -> str:
        header = self._batch(kv)
        try:
            original = self.manager.check(header, verify_sequence=kv.get("verify") != "0")
        except LogError as exc:
            return "\n".join([f"error {type(exc).__name__}: {exc}"] + self._state())
        if original is not None:
            return "\n".join([f"duplicate of offsets {original[0]}-{original[1]}"] + self._state())
        out = [f"append offsets {header.base_offset}-{header.last_offset}"] + self._write(header)
        return "\n".join(out + self._state())

    def cmd_replicate(self, kv) -> str:
        header = self._batch(kv)
        out = [f"replicated offsets {header.base_offset}-{header.last_offset}"] + self._write(header)
        return "\n".join(out + self._state())

    def cmd_marker(self, kv) -> str:
        pid, epoch, coordinator = int(kv["pid"]), int(kv["epoch"]), int(kv.get("coordinator", 0))
        try:
            self.manager.check_marker(pid, epoch, coordinator)
        except LogError as exc:
            return "\n".join([f"error {type(exc).__name__}: {exc}"] + self._state())
        control = ControlRecord({"commit": COMMIT, "abort": ABORT}[kv["type"]], coordinator)
        header = _header(pid, epoch, -1, 1, self.log_end, control=True)
        out = [f"{control.name} marker at offset {header.base_offset}"] + self._write(header, control)
        return "\n".join(out + self._state())

    def cmd_hw(self, kv) -> str:
        self.manager.on_high_watermark(int(kv["offset"]))
        return "\n".join(self._state())

    def cmd_snapshot(self, kv) -> str:
        self.manager.take_snapshot(self.log_end)
        return f"snapshots at {','.join(map(str, self.manager.snapshot_offsets()))}"

    def cmd_restart(self, kv) -> str:
        self.manager = ProducerStateManager(self.dir)
        start = self.manager.load(0, self.log_end)
        replayed = [(h, c) for h, c in self.log if h.base_offset >= start]
        for header, control in replayed:
            self.manager.update(header, control)
        return "\n".join([f"loaded snapshot {start}, replayed {len(replayed)} batch(es)"] + self._state())


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=4)
