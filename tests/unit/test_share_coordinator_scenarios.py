"""Data-driven scenarios for broker/group/share_coordinator_state.py (etcd-raft's `testdata/*.txt` style).

The files under testdata/share_coordinator/ follow tests/scenario.py. A harness holds one
`ShareCoordinatorState` (one `__share_group_state` partition) and the log of every record
it wrote, each encoded to bytes by broker/group/share_coordinator_records.py; what a call
writes is replayed at once, as the coordinator does once the append is durable.

Commands (share partitions are `group=g topic=t1 partition=0`: topic `tN` has id
UUID(int=N) and 3 partitions unless `partitions=N|none` says otherwise; times `now=` in ms):

- `state [every=500]`: a fresh state (`every`: share.coordinator.snapshot.update.records.per.snapshot).
- `initialize ... state_epoch=0 start=10`, `write ... state_epoch=0 leader_epoch=1 start=10
  batches=10-12:2:1,13:0:3` (first-last:delivery state:delivery count), `read ... leader_epoch=1`,
  `summary ...`, `delete ...`: one call; prints the error (if any), each record written, and
  for reads the state read.
- `cleanup topics=t1,t2`: tombstones for deleted topics.
- `reload`: a fresh state replayed from the log's bytes (a new coordinator after failover).
- `show`: every share partition's state; `log`: the records written so far.
- `combine start=5 so_far=... new=...`: Kafka's batch combiner alone.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from raftka.broker.group.share_coordinator_records import decode_record, encode_record
from raftka.broker.group.share_coordinator_state import (
    SNAPSHOT,
    Answer,
    ShareCoordinatorState,
    ShareGroupOffset,
    ShareRecord,
    StateBatch,
    combine_batches,
)
from raftka.broker.group.share_persister import ShareStateKey
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "share_coordinator"


def _topic_id(name: str) -> uuid.UUID:
    return uuid.UUID(int=int(name.lstrip("t")))


def _topic_name(topic_id: uuid.UUID) -> str:
    return f"t{topic_id.int}"


def _batches(spec: str) -> tuple[StateBatch, ...]:
    out = []
    for part in filter(None, spec.split(",")):
        offsets, state, count = part.split(":")
        first, _, last = offsets.partition("-")
        out.append(StateBatch(int(first), int(last or first), int(state), int(count)))
    return tuple(out)


def _show_batches(batches: tuple[StateBatch, ...]) -> str:
    return ",".join(f"{b.first_offset}-{b.last_offset}:{b.delivery_state}:{b.delivery_count}" for b in batches) or "-"


def _show_offset(v: ShareGroupOffset) -> str:
    return (f"snapshot_epoch={v.snapshot_epoch} state_epoch={v.state_epoch} leader_epoch={v.leader_epoch} "
            f"start={v.start_offset} complete={v.delivery_complete_count} batches={_show_batches(v.batches)}")


def _show_key(key: ShareStateKey) -> str:
    return f"{key.group_id}:{_topic_name(key.topic_id)}:{key.partition}"


def _show_record(record: ShareRecord) -> str:
    kind = "snapshot" if record.kind == SNAPSHOT else "update"
    if record.value is None:
        return f"{kind} {_show_key(record.key)} tombstone"
    v = record.value
    extra = f" created={v.create_timestamp}" if record.kind == SNAPSHOT else ""
    return f"{kind} {_show_key(record.key)} {_show_offset(v)}{extra}"


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.state = ShareCoordinatorState()
        self.log: list[tuple[bytes, bytes | None]] = []

    def _key(self, kv: dict[str, str]) -> ShareStateKey:
        return ShareStateKey(kv.get("group", "g"), _topic_id(kv.get("topic", "t1")), int(kv.get("partition", "0")))

    @staticmethod
    def _partitions(kv: dict[str, str]) -> int | None:
        value = kv.get("partitions", "3")
        return None if value == "none" else int(value)

    def _apply(self, answer: Answer) -> str:
        lines = [f"error {answer.error}: {answer.message}"] if answer.error else []
        for record in answer.records:
            self.log.append(encode_record(record))
            self.state.replay(record)
            lines.append(f"wrote {_show_record(record)}")
        if answer.state is not None:
            lines.append(f"state {_show_offset(answer.state)}")
        return "\n".join(lines) or "ok"

    def cmd_state(self, kv: dict[str, str]) -> str:
        self.state = ShareCoordinatorState(int(kv.get("every", "500")))
        self.log = []
        return "ok"

    def cmd_initialize(self, kv: dict[str, str]) -> str:
        return self._apply(self.state.initialize(self._key(kv), int(kv["state_epoch"]), int(kv["start"]),
                                                 int(kv.get("now", "0")), self._partitions(kv)))

    def cmd_write(self, kv: dict[str, str]) -> str:
        return self._apply(self.state.write(self._key(kv), int(kv["state_epoch"]), int(kv["leader_epoch"]),
                                            int(kv["start"]), _batches(kv.get("batches", "")),
                                            int(kv.get("now", "0")), self._partitions(kv),
                                            int(kv.get("complete", "-1"))))

    def cmd_read(self, kv: dict[str, str]) -> str:
        return self._apply(self.state.read(self._key(kv), int(kv["leader_epoch"]), int(kv.get("now", "0")),
                                           self._partitions(kv)))

    def cmd_summary(self, kv: dict[str, str]) -> str:
        return self._apply(self.state.read_summary(self._key(kv), self._partitions(kv)))

    def cmd_delete(self, kv: dict[str, str]) -> str:
        return self._apply(self.state.delete(self._key(kv), self._partitions(kv)))

    def cmd_cleanup(self, kv: dict[str, str]) -> str:
        deleted = frozenset(_topic_id(t) for t in kv["topics"].split(","))
        return self._apply(Answer(records=self.state.cleanup_topics(deleted)))

    def cmd_reload(self, kv: dict[str, str]) -> str:
        fresh = ShareCoordinatorState(self.state.snapshot_every)
        for key, value in self.log:
            record = decode_record(key, value)
            assert record is not None
            fresh.replay(record)
        self.state = fresh
        return self.cmd_show(kv)

    def cmd_show(self, kv: dict[str, str]) -> str:
        lines = []
        for key, value in sorted(self.state.offsets.items(), key=lambda kv_: _show_key(kv_[0])):
            lines.append(f"{_show_key(key)} {_show_offset(value)} updates={self.state.update_counts.get(key, 0)} "
                         f"leader_epoch_seen={self.state.leader_epochs.get(key)} "
                         f"state_epoch_seen={self.state.state_epochs.get(key)}")
        return "\n".join(lines) or "empty"

    def cmd_log(self, kv: dict[str, str]) -> str:
        return "\n".join(_show_record(r) for k, v in self.log if (r := decode_record(k, v)) is not None) or "empty"

    def cmd_combine(self, kv: dict[str, str]) -> str:
        return _show_batches(combine_batches(_batches(kv.get("so_far", "")), _batches(kv.get("new", "")),
                                             int(kv.get("start", "-1"))))


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=5)
