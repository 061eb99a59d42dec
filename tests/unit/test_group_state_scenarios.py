"""Data-driven scenarios for broker/group/group_state.py (classic consumer groups).

The files under testdata/group_state/ follow tests/scenario.py. Each command runs against
one `GroupState` ("g"; new member ids are `<client or instance id>-<n>`, n counting from 1)
and prints its result, the replies now owed to parked JoinGroup/SyncGroup requests, then the
group: `group: <phase> gen=.. protocol=.. leader=.. next_deadline=..` and one line per
member (`join`/`sync`: a request is parked; `synced`: it sent SyncGroup this generation).

Commands (times in ms; `member=` empty joins without a member id):

- `init [delay=0]`: a new group (group.initial.rebalance.delay.ms).
- `join member=a-1 [client=a] [instance=i] [session=10000] [rebalance=30000]
  [protocols=range,roundrobin] [topics=foo] [type=consumer] [require_id=1] now=..`:
  a JoinGroup; each protocol's metadata subscribes to `topics`.
- `sync member=a-1 gen=1 [assign=a-1:p0+p1,b-2:p2] [instance=i] now=..`: a SyncGroup (the
  leader's carries the assignment).
- `hb member=a-1 gen=1 [instance=i] now=..`, `commit member=a-1 gen=1 [instance=i] now=..`:
  Heartbeat, OffsetCommit validation (the error).
- `leave [member=a-1] [instance=i] now=..`, `tick now=..`, `dead`.
"""

from __future__ import annotations

from pathlib import Path

from raftka.broker.group.group_state import GroupState, JoinResult, Reply
from raftka.client.group_protocol import Subscription, decode_subscription, encode_subscription
from raftka.client.protocol import ErrorCode
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "group_state"


def _error(code: int) -> str:
    return ErrorCode(code).name


def _fmt_reply(reply: Reply) -> str:
    r = reply.result
    head = f"reply {reply.kind} {reply.member_id or '-'}: {_error(r.error_code)}"
    if r.error_code:
        return head
    if isinstance(r, JoinResult):
        members = ",".join(f"{m.member_id}[{','.join(decode_subscription(m.metadata).topics)}]" for m in r.members)
        return (f"{head} gen={r.generation_id} protocol={r.protocol_name} leader={r.leader}"
                + (f" members={members}" if members else ""))
    return f"{head} assignment={r.assignment.decode() or '-'}"


def _fmt_ms(ms: float | None) -> str:
    return "none" if ms is None else f"{ms:g}"


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.group: GroupState | None = None
        self.ids = 0

    def _new_id(self, client_id: str) -> str:
        self.ids += 1
        return f"{client_id}-{self.ids}"

    def _group(self) -> GroupState:
        assert self.group is not None, "init first"
        return self.group

    def _state(self) -> list[str]:
        g = self._group()
        lines = [f"group: {g.phase.value} gen={g.generation_id} protocol={g.protocol_name or '-'} "
                 f"leader={g.leader_id or '-'} next_deadline={_fmt_ms(g.next_deadline_ms())}"]
        for m in g.members.values():
            flags = [f for f, on in (("join", m.awaiting_join), ("sync", m.awaiting_sync), ("synced", m.synced))
                     if on]
            lines.append(f"  {m.member_id}: " + (f"instance={m.group_instance_id} " if m.group_instance_id else "")
                         + f"deadline={m.deadline_ms:g} assignment={m.assignment.decode() or '-'}"
                         + "".join(f" {f}" for f in flags))
        lines += [f"  pending {member_id}: until {until:g}" for member_id, until in g.pending_members.items()]
        return lines

    def _out(self, head: list[str], replies: list[Reply]) -> str:
        return "\n".join(head + [_fmt_reply(r) for r in replies] + self._state())

    def cmd_init(self, kv) -> str:
        self.group = GroupState("g", initial_rebalance_delay_ms=int(kv.get("delay", 0)), new_member_id=self._new_id)
        return "\n".join(self._state())

    def cmd_join(self, kv) -> str:
        meta = encode_subscription(Subscription(tuple(kv.get("topics", "foo").split(","))))
        protocols = [(name, meta) for name in kv.get("protocols", "range").split(",")]
        session = int(kv.get("session", 10000))
        waiting, replies = self._group().join(
            kv["member"], client_id=kv.get("client", "c"), client_host="/127.0.0.1", session_timeout_ms=session,
            rebalance_timeout_ms=int(kv.get("rebalance", 30000)), protocol_type=kv.get("type", "consumer"),
            protocols=protocols, now_ms=int(kv["now"]), require_known_member_id=kv.get("require_id") == "1",
            group_instance_id=kv.get("instance"))
        return self._out([f"waiting: {waiting or '-'}"], replies)

    def cmd_sync(self, kv) -> str:
        assignments = dict(pair.split(":") for pair in kv["assign"].split(",")) if "assign" in kv else {}
        replies = self._group().sync(kv["member"], int(kv["gen"]), {m: a.encode() for m, a in assignments.items()},
                                     int(kv["now"]), kv.get("instance"))
        return self._out([], replies)

    def cmd_hb(self, kv) -> str:
        code = self._group().heartbeat(kv["member"], int(kv["gen"]), int(kv["now"]), kv.get("instance"))
        return self._out([_error(code)], [])

    def cmd_commit(self, kv) -> str:
        code = self._group().validate_commit(kv.get("member", ""), int(kv["gen"]), int(kv["now"]),
                                             kv.get("instance"))
        return self._out([_error(code)], [])

    def cmd_leave(self, kv) -> str:
        code, replies = self._group().leave(kv.get("member", ""), int(kv["now"]), kv.get("instance"))
        return self._out([_error(code)], replies)

    def cmd_tick(self, kv) -> str:
        replies, removed = self._group().tick(int(kv["now"]))
        return self._out([f"removed: {','.join(removed) or '-'}"], replies)

    def cmd_dead(self, kv) -> str:
        return self._out([], self._group().mark_dead())


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=4)
