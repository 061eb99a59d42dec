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
  the default id is the name; each id stands for the UUID of its bytes). A group epoch record
  shows the topics its metadata hash is of: `GroupEpoch(3 bar=3,foo=6)` (`-`: none, hash 0).
- `hb member=a epoch=0 [topics=foo,bar] [regex=foo-.*] [owned=...] [instance=i] [assignor=range]
  [rebalance=300000] now=...`: a ConsumerGroupHeartbeat. At epoch 0, `rebalance`
  defaults to 300000 and `owned` to `-`; otherwise absent fields are null (unchanged).
  `member=` (empty) joins without a member id (v0): the group names it `m1`, `m2`...
  `regex=` (empty) clears the member's regex (what librdkafka sends when it has none).
  `deny=foo,bar`: with an authorizer that denies the member DESCRIBE on those topics.
  `image=7` (default 0), `new_topics=7` (default -1): the metadata image's offset and the one at
  which the coordinator last saw topics created (regex resolutions; their time is `now`).
- `tick now=...`: the timers.
- `load now=... [legacy=1]`: a new coordinator loads the group from its records (timers from
  `now`); `legacy=1`: as raftka wrote them before the metadata hash (each group epoch record
  without it, after a ConsumerGroupPartitionMetadata record of the subscribed topics).
- `commit member=a epoch=1 [version=9] [partitions=foo:0] [txn=1]`: OffsetCommit validation (of
  every partition of the topics by default), TxnOffsetCommit's with `txn=1`.
- `epochs member=a`: the member's assignment epochs (the partitions it holds, since when).

Classic members and the migration between protocols (`init policy=upgrade` sets
group.consumer.migration.policy):

- `classic gen=3 topics=foo a=foo:0,1 b=foo:2,3 [type=consumer] [protocols=range,roundrobin]
  [session=10000] [userdata=x]`: a Stable classic group "g" at generation 3 whose members
  subscribe to `topics` and hold those assignments (`b=` for none; `userdata`: a custom
  assignor's user data in each assignment).
- `upgrade now=...`: the consumer group takes the classic group's members over.
- `join member=a [instance=i] [topics=foo] [owned=foo:0] [protocols=range] [session=10000]
  [rebalance=300000] [version=4] now=...`: a JoinGroup (`member=` unknown: MEMBER_ID_REQUIRED
  at version 4+, the group names it `m1`...).
- `sync member=a gen=3 [name=range] now=...`, `heartbeat member=a gen=3 now=...`,
  `leave members=a,b now=...`: SyncGroup, Heartbeat, LeaveGroup.
- After a command that converts the group back into a classic group, the output shows the
  classic group (after its rebalance started) under `downgraded:`.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_state import (
    ClassicJoin,
    ConsumerGroupState,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    Heartbeat,
    HeartbeatError,
    MemberMetadataRecord,
    MetadataVersion,
    RegexResolutionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from raftka.broker.group.group_state import GroupState, Member
from raftka.broker.group.metadata_hash import group_hash, topic_hash
from raftka.client.group_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from raftka.client.protocol import ErrorCode
from raftka.client.records import TopicPartition
from tests.scenario import check_scenario_file

TESTDATA = Path(__file__).parent / "testdata" / "consumer_group"


class Harness:
    def __init__(self) -> None:
        self.group = ConsumerGroupState("g")
        self.topics: dict[str, TopicMeta] = {}
        self.records: list = []
        self.ids = 0
        self.classic: GroupState | None = None
        self.labels: dict[str, str] = {}  # topic UUID -> the id the file gives it
        self.hashes: dict[int, str] = {0: "-"}  # metadata hash -> the topics it is of

    # --- formatting ---------------------------------------------------------------------
    def _name(self, topic_id: str) -> str:
        label = self.labels.get(topic_id, topic_id)
        for meta in self.topics.values():
            if meta.topic_id == topic_id:
                return meta.name if label == meta.name else f"{meta.name}/{label}"
        return f"?{label}"

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
            case GroupEpochRecord(None):
                return "GroupEpoch(None)"
            case GroupEpochRecord(epoch, metadata_hash):
                return f"GroupEpoch({epoch} {self.hashes.get(metadata_hash, '?')})"
            case SubscriptionMetadataRecord(None):
                return "PartitionMetadata(tombstone)"
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
            if m.metadata.classic is not None:
                extra += (f" classic(session={m.metadata.classic.session_timeout_ms} "
                          f"protocols={','.join(n for n, _ in m.metadata.classic.protocols)})")
                extra += f" sync_by={m.sync_deadline_ms:g}" if m.sync_deadline_ms is not None else ""
                extra += f" join_by={m.join_deadline_ms:g}" if m.join_deadline_ms is not None else ""
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
        return ["records: " + (" ".join(self.fmt_record(r) for r in records) or "-")] + self.downgrade_lines()

    def downgrade_lines(self) -> list[str]:
        """The classic group a downgrade made (as the coordinator installs it), if any."""
        members, g = self.group.downgraded, self.group
        if members is None:
            return []
        g.downgraded = None
        classic = GroupState("g")
        classic.adopt(generation_id=g.group_epoch, members=members, now_ms=0)
        lines = [f"downgraded: generation={classic.generation_id} protocol={classic.protocol_name}"]
        for m in members:
            partitions = decode_assignment(m.assignment).partitions
            lines.append(f"  {m.member_id}: session={m.session_timeout_ms} assignment="
                         f"{';'.join(f'{tp.topic}:{tp.partition}' for tp in partitions) or '-'}")
        classic.rebalance(0)
        lines.append(f"  then {classic.phase.value}, heartbeat: "
                     f"{ErrorCode(classic.heartbeat(members[0].member_id, classic.generation_id, 0)).name}")
        self.classic = classic
        return lines

    def check_replay(self) -> None:
        fresh = ConsumerGroupState("g")
        for record in self.records:
            fresh.replay(record)
        g = self.group
        assert (fresh.group_epoch, fresh.assignment_epoch, fresh.assignment_timestamp_ms, fresh.target, fresh.metadata_hash,
                fresh.has_partition_metadata_record, fresh.resolved_regexes) == (
                    g.group_epoch, g.assignment_epoch, g.assignment_timestamp_ms, g.target, g.metadata_hash,
                    g.has_partition_metadata_record, g.resolved_regexes), "replay differs"
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
            session_timeout_ms=int(kv.get("session", 45000)), max_size=int(kv.get("max_size", 2**31 - 1)),
            migration_policy=kv.get("policy", "bidirectional"))
        self.records = []
        return self.state_lines()

    def cmd_topics(self, kv) -> list[str]:
        self.topics = {}
        for name, spec in kv.items():
            count, _, label = spec.partition("/")
            # The id's bytes as a UUID: ids sort as their labels do (the assignors order by id).
            raw = (label or name).encode()
            assert len(raw) <= 16, label or name
            topic_id = str(uuid.UUID(bytes=raw.ljust(16, b"\0")))
            self.labels[topic_id] = label or name
            self.topics[name] = TopicMeta(topic_id, name, int(count))
        metas = sorted(self.topics.values(), key=lambda t: t.name)
        for n in range(1, len(metas) + 1):
            for subset in itertools.combinations(metas, n):
                self.hashes[group_hash({t.name: topic_hash(t) for t in subset})] = ",".join(
                    f"{t.name}={t.partitions}" + ("" if self.labels[t.topic_id] == t.name
                                                  else f"/{self.labels[t.topic_id]}") for t in subset)
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
                                   assignors=self.group.assignors, migration_policy=self.group.migration_policy)
        if kv.get("legacy") == "1":
            subscribed = tuple(self.topics[n] for n in sorted(self.group.subscribed_topics()) if n in self.topics)
            self.records = [old for r in self.records for old in (
                (SubscriptionMetadataRecord(subscribed), GroupEpochRecord(r.epoch))
                if isinstance(r, GroupEpochRecord) and r.epoch is not None else (r,))]
        for record in self.records:
            fresh.replay(record)
        fresh.start_timers(float(kv["now"]))
        self.group = fresh
        return self.state_lines()

    def cmd_next_deadline(self, kv) -> list[str]:
        deadline = self.group.next_deadline_ms()
        return [f"next deadline: {'none' if deadline is None else f'{deadline:g}'}"]

    def cmd_commit(self, kv) -> list[str]:
        every = ";".join(f"{t.name}:{','.join(map(str, range(t.partitions)))}" for t in self.topics.values())
        partitions = self.parse_partitions(kv.get("partitions", every or "-"))
        code = self.group.validate_commit(kv["member"], int(kv["epoch"]), int(kv.get("version", 9)),
                                          transactional=kv.get("txn") == "1",
                                          partitions=[(t, p) for t, ps in partitions.items() for p in sorted(ps)])
        return [ErrorCode(code).name]

    def cmd_epochs(self, kv) -> list[str]:
        """A member's assignment epochs: partition@epoch, assigned then pending revocation."""
        a = self.group.members[kv["member"]].assignment
        return [f"{kind}: " + (" ".join(f"{self._name(t)}:{p}@{a.epochs[(t, p)]}" for t, ps in sorted(held.items())
                                         for p in sorted(ps)) or "-")
                for kind, held in (("assigned", a.assigned), ("revoking", a.pending_revocation))]

    # --- classic members --------------------------------------------------------------
    def _tps(self, text: str) -> tuple[TopicPartition, ...]:
        if text == "-":
            return ()
        return tuple(TopicPartition(name, int(p)) for chunk in text.split(";")
                     for name, ps in [chunk.split(":")] for p in ps.split(","))

    def _protocols(self, kv, topics: str, owned: str = "-") -> tuple[tuple[str, bytes], ...]:
        sub = encode_subscription(Subscription(tuple(topics.split(",")), None, self._tps(owned)),
                                  int(kv.get("subversion", 1)))
        return tuple((name, sub) for name in kv.get("protocols", "range").split(","))

    def cmd_classic(self, kv) -> list[str]:
        """A Stable classic group with these members and assignments."""
        reserved = {"gen", "topics", "type", "protocols", "session", "subversion", "userdata"}
        user_data = kv["userdata"].encode() if "userdata" in kv else None
        members = [Member(mid, "client", "/127.0.0.1", int(kv.get("session", 10000)), 300000,
                          kv.get("type", "consumer"), self._protocols(kv, kv["topics"]),
                          assignment=encode_assignment(Assignment(self._tps(spec or "-"), user_data)))
                   for mid, spec in kv.items() if mid not in reserved]
        self.classic = GroupState("g")
        self.classic.restore(protocol_type=kv.get("type", "consumer"), generation_id=int(kv["gen"]),
                             protocol_name=kv.get("protocols", "range").split(",")[0], leader_id=None,
                             members=members, now_ms=0)
        return [f"classic generation={self.classic.generation_id} members={','.join(sorted(self.classic.members))}"]

    def cmd_upgrade(self, kv) -> list[str]:
        assert self.classic is not None
        try:
            records = self.group.upgrade_from(self.classic, self.topics, float(kv["now"]))
        except HeartbeatError as exc:
            return [f"error {ErrorCode(exc.code).name}: {exc}"]
        return self.emitted(records) + self.state_lines()

    def cmd_join(self, kv) -> list[str]:
        join = ClassicJoin(kv["member"], kv.get("instance"), "client", "/127.0.0.1", int(kv.get("session", 10000)),
                           int(kv.get("rebalance", 300000)), kv.get("type", "consumer"),
                           self._protocols(kv, kv.get("topics", "foo"), kv.get("owned", "-")),
                           require_known_member_id=int(kv.get("version", 4)) >= 4)
        result, records = self.group.classic_join(join, self.topics, float(kv["now"]), self._new_id)
        if result.error_code:
            assert not records, records
            message = f": {result.error_message}" if result.error_message else ""
            return [f"error {ErrorCode(result.error_code).name} member={result.member_id}{message}"]
        return ([f"ok member={result.member_id} generation={result.generation_id} protocol={result.protocol_name}"]
                + self.emitted(records) + self.state_lines())

    def cmd_sync(self, kv) -> list[str]:
        r = self.group.classic_sync(kv["member"], kv.get("instance"), int(kv["gen"]), float(kv["now"]),
                                    "consumer", kv.get("name"), topics=self.topics)
        if r.error_code:
            return [f"error {ErrorCode(r.error_code).name}: {r.error_message}"] + self.state_lines()
        version = int.from_bytes(r.assignment[:2], "big")
        assigned = ";".join(f"{tp.topic}:{tp.partition}" for tp in decode_assignment(r.assignment).partitions)
        return [f"ok assignment={assigned or '-'} version={version}"] + self.state_lines()

    def cmd_heartbeat(self, kv) -> list[str]:
        code, message = self.group.classic_heartbeat(kv["member"], kv.get("instance"), int(kv["gen"]),
                                                     float(kv["now"]))
        return [ErrorCode(code).name + (f": {message}" if message else "")] + self.state_lines()

    def cmd_leave(self, kv) -> list[str]:
        members = [(m, None) for m in kv["members"].split(",")]
        codes, _, records = self.group.classic_leave(members, self.topics)
        return ([" ".join(ErrorCode(c).name for c in codes)] + self.emitted(records) + self.state_lines())

    def cmd_fetch(self, kv) -> list[str]:
        member = None if kv["member"] == "None" else kv["member"]
        return [ErrorCode(self.group.validate_fetch(member, int(kv["epoch"]))).name]


FILES = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 6, FILES


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: Path) -> None:
    check_scenario_file(path, Harness().run)
