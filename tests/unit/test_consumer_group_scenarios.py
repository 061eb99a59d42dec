"""Data-driven scenarios for broker/group/consumer_group_state.py (KIP-848), etcd-raft style.

Each file under testdata/consumer_group/ is a sequence of blocks (the format of
tests/scenario.py, the runner the cores' scenario tests share):

    # comments
    command key=value ...
    ----
    expected output
    <blank line>

Rewrite the expectations from the code's output with RAFTKA_TESTDATA_REWRITE=1 (then
review the diff). After every command the harness also checks that replaying every
record the group emitted so far onto an empty group gives the same group: what the
coordinator persists is exactly what it serves.

Commands (times in ms; partition sets as `foo:0,1;bar:2`, `-` for empty):

- `init [assignors=uniform,range] [session=45000] [max_size=...]`: a new group "g".
- `topics foo=6 bar=3`: the metadata image's topics (`foo=6/id2`: with topic id id2;
  the default id is the name).
- `hb member=a epoch=0 [topics=foo,bar] [regex=foo-.*] [owned=...] [instance=i] [assignor=range]
  [rebalance=300000] now=...`: a ConsumerGroupHeartbeat. At epoch 0, `rebalance`
  defaults to 300000 and `owned` to `-`; otherwise absent fields are null (unchanged).
  `member=` (empty) joins without a member id (v0): the group names it `m1`, `m2`...
  `regex=` (empty) clears the member's regex (what librdkafka sends when it has none).
  `deny=foo,bar`: with an authorizer that denies the member DESCRIBE on those topics.
  `image=7` (default 0), `new_topics=7` (default -1): the metadata image's offset and the one at
  which the coordinator last saw topics created (regex resolutions; their time is `now`).
- `tick now=...`: the timers.
- `load now=...`: a new coordinator loads the group from its records (timers from `now`).
- `commit member=a epoch=1 [version=9]`: OffsetCommit validation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_state import (
    ConsumerGroupState,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    Heartbeat,
    MemberMetadataRecord,
    MetadataVersion,
    RegexResolutionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from raftka.client.protocol import ErrorCode
from tests.scenario import check_scenario_file

TESTDATA = Path(__file__).parent / "testdata" / "consumer_group"


class Harness:
    def __init__(self) -> None:
        self.group = ConsumerGroupState("g")
        self.topics: dict[str, TopicMeta] = {}
        self.records: list = []
        self.ids = 0

    # --- formatting ---------------------------------------------------------------------
    def _name(self, topic_id: str) -> str:
        for meta in self.topics.values():
            if meta.topic_id == topic_id:
                return meta.name if meta.topic_id == meta.name else f"{meta.name}/{topic_id}"
        return f"?{topic_id}"

    def fmt(self, partitions) -> str:
        if not partitions:
            return "-"
        parts = sorted((self._name(t), sorted(ps)) for t, ps in partitions.items() if ps)
        return ";".join(f"{name}:{','.join(map(str, ps))}" for name, ps in parts) or "-"

    def parse_partitions(self, text: str) -> dict[str, frozenset[int]]:
        if text == "-":
            return {}
        out = {}
        for chunk in text.split(";"):
            name, ps = chunk.split(":")
            out[self.topics[name].topic_id] = frozenset(int(p) for p in ps.split(","))
        return out

    def fmt_record(self, record) -> str:
        match record:
            case GroupEpochRecord(epoch):
                return f"GroupEpoch({epoch})"
            case SubscriptionMetadataRecord(topics):
                return f"PartitionMetadata({','.join(f'{t.name}={t.partitions}' for t in topics) or '-'})"
            case MemberMetadataRecord(member, metadata):
                return f"MemberMetadata({member}{'' if metadata is not None else ', tombstone'})"
            case TargetAssignmentMemberRecord(member, partitions):
                return f"Target({member}, {self.fmt(partitions) if partitions is not None else 'tombstone'})"
            case TargetAssignmentEpochRecord(epoch):
                return f"TargetEpoch({epoch})"
            case CurrentAssignmentRecord(member, assignment):
                return f"Current({member}, {assignment.member_epoch if assignment else 'tombstone'})"
            case RegexResolutionRecord(regex, resolution):
                if resolution is None:
                    return f"Regex({regex}, tombstone)"
                return f"Regex({regex}, {','.join(sorted(resolution.topics)) or '-'} v={resolution.version})"
        raise AssertionError(record)

    def state_lines(self) -> list[str]:
        g = self.group
        lines = [f"group epoch={g.group_epoch} assignment_epoch={g.assignment_epoch} state={g.describe_state()}"
                 f" assignor={g.preferred_assignor()}"]
        for m in sorted(g.members.values(), key=lambda m: m.member_id):
            a = m.assignment
            extra = f" instance={m.instance_id}" if m.instance_id else ""
            extra += f" regex={m.metadata.subscribed_topic_regex}" if m.metadata.subscribed_topic_regex else ""
            deadline = f" revoke_by={m.rebalance_deadline[0]:g}" if m.rebalance_deadline else ""
            lines.append(f"  {m.member_id}{extra}: epoch={a.member_epoch} prev={a.previous_member_epoch} "
                         f"{a.state.name} assigned={self.fmt(a.assigned)} revoking={self.fmt(a.pending_revocation)} "
                         f"target={self.fmt(g.target.get(m.member_id, {}))} "
                         f"session={m.session_deadline_ms:g}{deadline}")
        for regex, r in sorted(g.resolved_regexes.items()):
            lines.append(f"  regex {regex} -> {','.join(sorted(r.topics)) or '-'} v={r.version} at={r.timestamp_ms}")
        return lines

    def emitted(self, records) -> list[str]:
        self.records += records
        self.check_replay()
        return ["records: " + (" ".join(self.fmt_record(r) for r in records) or "-")]

    def check_replay(self) -> None:
        fresh = ConsumerGroupState("g")
        for record in self.records:
            fresh.replay(record)
        g = self.group
        assert (fresh.group_epoch, fresh.assignment_epoch, fresh.target, fresh.subscription_metadata,
                fresh.resolved_regexes) == (g.group_epoch, g.assignment_epoch, g.target,
                                            g.subscription_metadata, g.resolved_regexes), "replay differs"
        assert {k: (m.metadata, m.assignment) for k, m in fresh.members.items()} == {
            k: (m.metadata, m.assignment) for k, m in g.members.items()}, "replayed members differ"

    # --- commands -----------------------------------------------------------------------
    def run(self, command: str) -> str:
        name, *args = command.split()
        kv = dict(a.split("=", 1) for a in args)
        return "\n".join(getattr(self, f"cmd_{name}")(kv))

    def cmd_init(self, kv) -> list[str]:
        self.group = ConsumerGroupState(
            "g", assignors=tuple(kv.get("assignors", "uniform,range").split(",")),
            session_timeout_ms=int(kv.get("session", 45000)), max_size=int(kv.get("max_size", 2**31 - 1)))
        self.records = []
        return self.state_lines()

    def cmd_topics(self, kv) -> list[str]:
        self.topics = {}
        for name, spec in kv.items():
            count, _, topic_id = spec.partition("/")
            self.topics[name] = TopicMeta(topic_id or name, name, int(count))
        return [f"topics: {' '.join(f'{t.name}={t.partitions}' for t in self.topics.values())}"]

    def _new_id(self) -> str:
        self.ids += 1
        return f"m{self.ids}"

    def cmd_hb(self, kv) -> list[str]:
        epoch = int(kv["epoch"])
        joining = epoch == 0
        owned = kv.get("owned", "-" if joining else None)
        hb = Heartbeat(
            member_id=kv["member"], member_epoch=epoch, instance_id=kv.get("instance"),
            rebalance_timeout_ms=int(kv.get("rebalance", 300000 if joining else -1)),
            subscribed_topic_names=tuple(kv["topics"].split(",")) if "topics" in kv else None,
            subscribed_topic_regex=kv.get("regex"),
            may_describe=(lambda name: name not in kv["deny"].split(",")) if "deny" in kv else None,
            server_assignor=kv.get("assignor"),
            owned=self.parse_partitions(owned) if owned is not None else None)
        image = MetadataVersion(int(kv.get("image", 0)), int(kv.get("new_topics", -1)))
        result, records = self.group.heartbeat(hb, self.topics, float(kv["now"]), self._new_id, image=image)
        if result.error_code:
            assert not records, records
            return [f"error {ErrorCode(result.error_code).name}: {result.error_message}"]
        else:
            assignment = self.fmt(result.assignment) if result.assignment is not None else "unchanged"
            head = (f"ok member={result.member_id} epoch={result.member_epoch} "
                    f"interval={result.heartbeat_interval_ms} assignment={assignment}")
        return [head] + self.emitted(records) + self.state_lines()

    def cmd_tick(self, kv) -> list[str]:
        removed, records = self.group.tick(float(kv["now"]), self.topics)
        return [f"removed: {','.join(removed) or '-'}"] + self.emitted(records) + self.state_lines()

    def cmd_load(self, kv) -> list[str]:
        """A new coordinator: the group rebuilt from its records, its timers started."""
        fresh = ConsumerGroupState("g", session_timeout_ms=self.group.session_timeout_ms,
                                   assignors=self.group.assignors)
        for record in self.records:
            fresh.replay(record)
        fresh.start_timers(float(kv["now"]))
        self.group = fresh
        return self.state_lines()

    def cmd_next_deadline(self, kv) -> list[str]:
        deadline = self.group.next_deadline_ms()
        return [f"next deadline: {'none' if deadline is None else f'{deadline:g}'}"]

    def cmd_commit(self, kv) -> list[str]:
        code = self.group.validate_commit(kv["member"], int(kv["epoch"]), int(kv.get("version", 9)))
        return [ErrorCode(code).name]

    def cmd_fetch(self, kv) -> list[str]:
        member = None if kv["member"] == "None" else kv["member"]
        return [ErrorCode(self.group.validate_fetch(member, int(kv["epoch"]))).name]


FILES = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 6, FILES


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: Path) -> None:
    check_scenario_file(path, Harness().run)
