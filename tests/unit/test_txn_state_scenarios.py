"""Data-driven scenarios for broker/txn/txn_state.py (the transaction coordinator's rules).

The files under testdata/txn_state/ follow tests/scenario.py. The harness plays the
coordinator shell: it keeps each transactional id's metadata, hands out fresh producer ids
(1000, 1001, ...) when a decision asks for one, and makes every write durable at once. Each
command prints the answer (Kafka's error name), the write (`write: <state> ...` and
`send markers`), then the id's metadata:
`<id>: <state> pid=.. epoch=.. last=<pid>/<epoch> timeout=.. partitions=.. start=.. update=..`,
then ` next=<pid>` and ` tv=2` when set (transaction version 2).

Commands (times in ms; partitions as `foo-0,bar-1`; `id` defaults to t):

- `init_pid now=0 [id=t] [timeout=60000] [pid=.. epoch=..] [max=900000]`: InitProducerId
  (v3+ names the producer's current id and epoch).
- `add pid=1000 epoch=0 partitions=foo-0 now=.. [tv=2]`: AddPartitionsToTxn / AddOffsetsToTxn
  (`tv=2`: transaction version 2's implicit add, from a Produce v12 or TxnOffsetCommit v5).
- `verify pid=1000 epoch=0 partitions=foo-0`: AddPartitionsToTxn v4 verify_only (KIP-890).
- `end pid=1000 epoch=0 commit=1|0 now=.. [tv=2]`: EndTxn (`tv=2`: v5, whose answer also
  carries `pid=.. epoch=..`, the producer id and epoch to go on with).
- `markers_acked now=..`: every marker of the Prepare* transaction was written: CompleteX.
- `in_flight to=Ongoing`: a write is pending (the shell marks the id while it is in flight).
- `tick now=..`: the transaction timeout check; `expire now=.. [expiration=604800000]`:
  transactional.id.expiration.ms.
- `epoch value=32766`: set the producer epoch (to reach exhaustion without 32 000 lines).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from raftka.broker.txn import txn_state as ts
from raftka.client.protocol import ErrorCode
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "txn_state"


def _error(code: int) -> str:
    return ErrorCode(code).name


def _partitions(text: str) -> frozenset[tuple[str, int]]:
    out = set()
    for tp in text.split(","):
        topic, _, index = tp.rpartition("-")
        out.add((topic, int(index)))
    return frozenset(out)


def _fmt_partitions(partitions) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions)) or "-"


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.metas: dict[str, ts.TxnMetadata | None] = {}
        self.next_pid = 1000

    def _meta_line(self, tid: str) -> str:
        m = self.metas.get(tid)
        if m is None:
            return f"{tid}: unknown"
        pending = f" pending={m.pending.display_name}" if m.pending is not None else ""
        v2 = (f" next={m.next_producer_id}" if m.next_producer_id != ts.NO_PRODUCER_ID else "") + (
            f" tv={m.client_txn_version}" if m.client_txn_version else "")
        return (f"{tid}: {m.state.display_name} pid={m.producer_id} epoch={m.producer_epoch} "
                f"last={m.last_producer_id}/{m.last_producer_epoch} timeout={m.timeout_ms} "
                f"partitions={_fmt_partitions(m.partitions)} start={m.start_ms} update={m.update_ms}{pending}{v2}")

    def _decided(self, tid: str, decision: ts.Decision) -> str:
        lines = [f"answer: {_error(decision.answer)}"]
        if decision.write is not None:
            lines.append(f"write: {decision.write.state.display_name}" + (" (send markers)" if decision.send_markers
                                                                          else ""))
            self.metas[tid] = decision.write
        return "\n".join(lines + [self._meta_line(tid)])

    def cmd_init_pid(self, kv) -> str:
        tid = kv.get("id", "t")
        args = dict(expected_pid=int(kv.get("pid", -1)), expected_epoch=int(kv.get("epoch", -1)),
                    max_timeout_ms=int(kv.get("max", 900000)), now_ms=int(kv["now"]))
        meta, timeout = self.metas.get(tid), int(kv.get("timeout", 60000))
        try:
            decision = ts.init_producer_id(meta, tid, timeout, **args)
        except ts.NeedProducerId:
            decision = ts.init_producer_id(meta, tid, timeout, new_producer_id=self.next_pid, **args)
            self.next_pid += 1
        return self._decided(tid, decision)

    def cmd_add(self, kv) -> str:
        tid = kv.get("id", "t")
        return self._decided(tid, ts.add_partitions(self.metas.get(tid), tid, int(kv["pid"]), int(kv["epoch"]),
                                                    _partitions(kv["partitions"]), int(kv["now"]),
                                                    int(kv.get("tv", ts.TV_1))))

    def cmd_verify(self, kv) -> str:
        tid = kv.get("id", "t")
        code, per_partition = ts.verify_partitions(self.metas.get(tid), tid, int(kv["pid"]), int(kv["epoch"]),
                                                   _partitions(kv["partitions"]))
        lines = [f"answer: {_error(code)}"]
        lines += [f"  {t}-{p}: {_error(c)}" for (t, p), c in sorted(per_partition.items())]
        return "\n".join(lines)

    def cmd_end(self, kv) -> str:
        tid = kv.get("id", "t")
        tv = int(kv.get("tv", ts.TV_1))
        args = (self.metas.get(tid), tid, int(kv["pid"]), int(kv["epoch"]), kv["commit"] == "1", int(kv["now"]), tv)
        try:
            decision = ts.end_txn(*args)
        except ts.NeedProducerId:
            decision = ts.end_txn(*args, new_producer_id=self.next_pid)
            self.next_pid += 1
        out = self._decided(tid, decision)
        if tv < ts.TV_2 or decision.answer != ts.NONE:
            return out
        # EndTxn v5's answer: the completion's id/epoch after a write, else the current ones.
        current = self.metas[tid]
        assert current is not None
        pid, epoch = ts.end_txn_answer(decision.write) if decision.write is not None else (
            current.producer_id, current.producer_epoch)
        first, _, rest = out.partition("\n")
        return f"{first} pid={pid} epoch={epoch}\n{rest}"

    def cmd_markers_acked(self, kv) -> str:
        tid = kv.get("id", "t")
        meta = self.metas[tid]
        assert meta is not None
        self.metas[tid] = ts.complete(meta, int(kv["now"]))
        return f"write: {self.metas[tid].state.display_name}\n{self._meta_line(tid)}"

    def cmd_in_flight(self, kv) -> str:
        tid = kv.get("id", "t")
        meta = self.metas[tid]
        assert meta is not None
        self.metas[tid] = dataclasses.replace(meta, pending=ts.STATE_BY_NAME[kv["to"]])
        return self._meta_line(tid)

    def cmd_epoch(self, kv) -> str:
        tid = kv.get("id", "t")
        meta = self.metas[tid]
        assert meta is not None
        self.metas[tid] = dataclasses.replace(meta, producer_epoch=int(kv["value"]))
        return self._meta_line(tid)

    def cmd_tick(self, kv) -> str:
        tid = kv.get("id", "t")
        meta = self.metas[tid]
        assert meta is not None
        decision = ts.timed_out(meta, int(kv["now"]))
        if decision is None:
            return f"not due\n{self._meta_line(tid)}"
        return "timed out, abort\n" + self._decided(tid, decision)

    def cmd_expire(self, kv) -> str:
        tid = kv.get("id", "t")
        meta = self.metas[tid]
        assert meta is not None
        now = int(kv["now"])
        if not ts.expired(meta, now, int(kv.get("expiration", 604800000))):
            return f"kept\n{self._meta_line(tid)}"
        self.metas[tid] = None
        return f"write: {meta.to(ts.TxnState.DEAD, now).state.display_name} (tombstone)\n{self._meta_line(tid)}"


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=4)
