"""Data-driven scenarios for broker/group/share_group_state.py (etcd-raft's `testdata/*.txt` style).

The files under testdata/share_group/ follow tests/scenario.py; each command
runs against one `ShareGroupState` and prints the answer, then the group:
`group: <state> epoch=.. assignment_epoch=..` and one line per member.

Commands (times in ms; partitions print as topic-partition):

- `init [group=g] [session=45000] [interval=5000] [max=200]`: a new share group.
- `topics t1=3 t2=1`: the topics that exist now (name=partition count; `-` for none).
- `hb member=m1 epoch=0 now=0 [topics=t1,t2] [rack=r1]`: a ShareGroupHeartbeat.
- `expire now=...`: the session-timeout check.
"""

from __future__ import annotations

from pathlib import Path

from raftka.broker.group.share_group_state import Heartbeat, ShareGroupConfig, ShareGroupState
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "share_group"


def _fmt(tps) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps)) or "-"


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.group: ShareGroupState | None = None
        self.partitions: dict[str, int] = {}

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
        self.partitions = {t: int(n) for t, n in kv.items()}
        return "ok"

    def cmd_hb(self, kv) -> str:
        topics = tuple(t for t in kv["topics"].split(",") if t and t != "-") if "topics" in kv else None
        request = Heartbeat(kv["member"], int(kv["epoch"]), topics, kv.get("rack"))
        r = self._group().heartbeat(request, self.partitions, int(kv["now"]))
        if r.error:
            head = f"error {r.error}: {r.message}"
        else:
            head = (f"ok member={r.member_id} epoch={r.member_epoch} interval={r.heartbeat_interval_ms} "
                    f"assignment={'unchanged' if r.assignment is None else _fmt(r.assignment)}")
        return "\n".join([head] + self._state_lines())

    def cmd_expire(self, kv) -> str:
        g = self._group()
        head = f"next session deadline: {g.next_session_deadline()}"
        gone = g.expire_sessions(self.partitions, int(kv["now"]))
        return "\n".join([head, f"expired: {','.join(gone) or '-'}"] + self._state_lines())


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=3)
