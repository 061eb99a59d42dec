"""Data-driven scenarios for broker/group/share_group_state.py (etcd-raft's `testdata/*.txt` style).

The files under testdata/share_group/ follow tests/scenario.py; each command
runs against one `ShareGroupState` and prints the answer, then the group:
`group: <state> epoch=.. assignment_epoch=..` and one line per member.

Commands (times in ms; partitions print as topic-partition):

- `init [group=g] [session=45000] [interval=5000] [max=200]`: a new share group.
- `topics t1=3 t2=1`: the topics that exist now (name=partition count; `-` for none). A
  topic's id is derived from its name; `t1=3/2` is its second incarnation (deleted and
  created again: another id).
- `hb member=m1 epoch=0 now=0 [topics=t1,t2] [rack=r1]`: a ShareGroupHeartbeat.
- `expire now=...`: the session-timeout check.
- `gate`: from now on heartbeats and expiry see only the assignable partitions (share
  state initialized), as the coordinator shell passes them.
- `initialize [fail=t-0,t-1]`: the subscribed partitions to initialize and their start
  offsets; marks them initializing, then initialized except those that `fail`.
- `records`: the `__consumer_offsets` records written since the last `records`, as the
  shell writes them (`changes` after every command).
- `reload now=... [legacy=1]`: a new group replayed from every record written so far; its
  records must equal the live group's, and it becomes the group (sessions restarted at
  `now`). `legacy=1`: the ShareGroupMetadata records are replayed without their metadata
  hash (0), as raftka wrote them before it kept the hash.

Records print as their fields; ShareGroupMetadata's metadata hash (KIP-1101) as the topics
of the current image whose hash it is (`hash=jobs+other`), `0`, or in hex when it is
neither (the hash of an image gone).
- `delete`: the tombstones of DeleteGroups.
- `forget`: the initialization state of partitions that no longer exist is dropped.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from itertools import combinations
from pathlib import Path

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.metadata_hash import subscription_hash
from raftka.broker.group.share_group_state import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    Heartbeat,
    MemberMetadataRecord,
    ShareGroupConfig,
    ShareGroupRecord,
    ShareGroupState,
    StatePartitionsRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    changes,
)
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "share_group"


def _fmt(tps) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps)) or "-"


def _hash(h: int, metas: dict[str, TopicMeta]) -> str:
    """The metadata hash as the topics of `metas` whose hash it is."""
    if h == 0:
        return "0"
    for n in range(1, len(metas) + 1):
        for names in combinations(sorted(metas), n):
            if subscription_hash(names, metas) == h:
                return "+".join(names)
    return f"{h & (1 << 64) - 1:016x}"


def _record(r: ShareGroupRecord, metas: dict[str, TopicMeta]) -> str:
    match r:
        case GroupEpochRecord(None):
            return "ShareGroupMetadata epoch=None"
        case GroupEpochRecord(epoch, metadata_hash):
            return f"ShareGroupMetadata epoch={epoch} hash={_hash(metadata_hash, metas)}"
        case TargetEpochRecord(epoch):
            return f"ShareGroupTargetAssignmentMetadata epoch={epoch}"
        case MemberMetadataRecord(member, meta):
            return f"ShareGroupMemberMetadata {member} " + (
                "tombstone" if meta is None else f"topics={','.join(meta.subscribed_topic_names)} rack={meta.rack_id}")
        case TargetMemberRecord(member, tps):
            return f"ShareGroupTargetAssignmentMember {member} " + ("tombstone" if tps is None else _fmt(tps))
        case CurrentAssignmentRecord(member, a):
            return f"ShareGroupCurrentMemberAssignment {member} " + (
                "tombstone" if a is None else
                f"epoch={a.member_epoch} previous={a.previous_member_epoch} assigned={_fmt(a.partitions)}")
        case StatePartitionsRecord(value):
            return "ShareGroupStatePartitionMetadata " + (
                "tombstone" if value is None else
                f"initializing={_fmt(value.initializing)} initialized={_fmt(value.initialized)}")
    raise AssertionError(r)


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.group: ShareGroupState | None = None
        self.partitions: dict[str, int] = {}
        self.metas: dict[str, TopicMeta] = {}
        self.gated = False
        self.written: list[ShareGroupRecord] = []
        self.unshown: list[ShareGroupRecord] = []

    def _seen(self) -> dict[str, int]:
        return self._group().assignable(self.partitions) if self.gated else self.partitions

    def _write(self, before) -> None:
        records = changes(before, self._group().records())
        self.written += records
        self.unshown += records

    def _group(self) -> ShareGroupState:
        assert self.group is not None, "init first"
        return self.group

    def _state_lines(self) -> list[str]:
        g = self._group()
        lines = [f"group: {g.state} epoch={g.group_epoch} assignment_epoch={g.assignment_epoch}"]
        for m in sorted(g.members.values(), key=lambda m: m.member_id):
            lines.append(f"  {m.member_id}: epoch={m.member_epoch} previous={m.previous_member_epoch} "
                         f"topics={','.join(sorted(m.subscribed_topic_names)) or '-'} "
                         f"assigned={_fmt(m.assignment)} target={_fmt(g.target.get(m.member_id, ()))} "
                         f"deadline={m.session_deadline_ms}" + (f" rack={m.rack_id}" if m.rack_id else ""))
        return lines

    def cmd_init(self, kv) -> str:
        config = ShareGroupConfig(int(kv.get("session", 45000)), int(kv.get("interval", 5000)),
                                  int(kv.get("max", 200)))
        self.group = ShareGroupState(kv.get("group", "g"), config)
        return "\n".join(self._state_lines())

    def cmd_topics(self, kv) -> str:
        self.partitions, self.metas = {}, {}
        for topic, value in kv.items():
            count, _, incarnation = value.partition("/")
            self.partitions[topic] = int(count)
            topic_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{topic}/{incarnation or 1}"))
            self.metas[topic] = TopicMeta(topic_id, topic, int(count))
        return "ok"

    def cmd_hb(self, kv) -> str:
        topics = tuple(t for t in kv["topics"].split(",") if t and t != "-") if "topics" in kv else None
        request = Heartbeat(kv["member"], int(kv["epoch"]), topics, kv.get("rack"))
        before = self._group().records()
        r = self._group().heartbeat(request, self._seen(), int(kv["now"]), self.metas)
        self._write(before)
        if r.error:
            head = f"error {r.error}: {r.message}"
        else:
            head = (f"ok member={r.member_id} epoch={r.member_epoch} interval={r.heartbeat_interval_ms} "
                    f"assignment={'unchanged' if r.assignment is None else _fmt(r.assignment)}")
        return "\n".join([head] + self._state_lines())

    def cmd_expire(self, kv) -> str:
        g = self._group()
        head = f"next session deadline: {g.next_session_deadline()}"
        before = g.records()
        gone = g.expire_sessions(self._seen(), int(kv["now"]), self.metas)
        self._write(before)
        return "\n".join([head, f"expired: {','.join(gone) or '-'}"] + self._state_lines())

    def cmd_gate(self, kv) -> str:
        self.gated = True
        return "ok"

    def cmd_initialize(self, kv) -> str:
        g = self._group()
        before = g.records()
        wanted = g.to_initialize(g.subscribed_topics(), self.partitions)
        g.mark_initializing(wanted)
        self._write(before)
        failed = {(t, int(p)) for t, _, p in (x.rpartition("-") for x in kv.get("fail", "").split(",") if x)}
        before = g.records()
        g.mark_initialized(tp for tp in wanted if tp not in failed)
        self._write(before)
        return "initialize: " + (" ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(wanted.items())) or "-")

    def cmd_forget(self, kv) -> str:
        before = self._group().records()
        self._group().forget_topics(self.partitions)
        self._write(before)
        return "ok"

    def cmd_records(self, kv) -> str:
        out, self.unshown = [_record(r, self.metas) for r in self.unshown], []
        return "\n".join(out) or "-"

    def cmd_reload(self, kv) -> str:
        g = self._group()
        fresh = ShareGroupState(g.group_id, g.config)
        legacy = kv.get("legacy") == "1"
        for r in self.written:
            fresh.replay(replace(r, metadata_hash=0) if legacy and isinstance(r, GroupEpochRecord) else r)
        if legacy:
            g.metadata_hash = 0  # what the live group would be had it been written so
        assert fresh.records() == g.records(), (fresh.records(), g.records())
        fresh.restart_sessions(self._seen(), int(kv["now"]))
        self.group = fresh
        return "\n".join(["reloaded" + (" (deleted)" if fresh.deleted else "")] + self._state_lines())

    def cmd_delete(self, kv) -> str:
        g = self._group()
        records = g.deletion_records()
        self.written += records
        self.group = ShareGroupState(g.group_id, g.config)  # the shell forgets a deleted group
        return "\n".join(_record(r, self.metas) for r in records) or "-"


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=3)
