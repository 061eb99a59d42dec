"""Random schedules of well-behaved KIP-848 clients against the pure core
(broker/group/consumer_group_state.py), checking Kafka's promises at every step:

- safety: no partition is ever owned by two live clients at once (a client owns what its
  last answer assigned it, and gives up the rest at once, as the protocol asks), and on the
  coordinator no partition is both assigned or pending revocation at two members;
- persistence: replaying every record the group emitted rebuilds the same group;
- progress: once everybody heartbeats a few times in a row, the group is Stable and every
  subscribed partition is owned by exactly one live client.

Clients join, heartbeat (some answers are lost: the client goes on with what it had), leave,
crash (their sessions expire), and rejoin after a fence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_state import ConsumerGroupState, Heartbeat

TOPICS = {"a": TopicMeta("00000000-0000-0000-0000-00000000000a", "a", 6),
          "b": TopicMeta("00000000-0000-0000-0000-00000000000b", "b", 3)}
SUBSCRIPTIONS = (("a",), ("a", "b"), ("b",))
SESSION_MS = 45_000


@dataclass
class Client:
    name: str
    topics: tuple[str, ...]
    instance: str | None = None
    epoch: int = 0  # 0: (re)joining next
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    alive: bool = True
    joined: bool = False
    full: bool = False  # after a lost answer the next heartbeat is a full one (Kafka's client)


class World:
    def __init__(self, assignor: str) -> None:
        self.group = ConsumerGroupState("g", assignors=(assignor, "uniform" if assignor == "range" else "range"))
        self.now = 0.0
        self.clients: list[Client] = []
        self.records: list = []
        self.incarnations = 0

    def client(self, index: int, subscription: int, static: bool) -> Client:
        while len(self.clients) <= index:
            n = len(self.clients)
            self.clients.append(Client(f"c{n}", SUBSCRIPTIONS[(n + subscription) % len(SUBSCRIPTIONS)],
                                       f"instance-{n}" if static else None))
        return self.clients[index]

    def heartbeat(self, c: Client, lost: bool = False) -> None:
        """One heartbeat; `lost`: the coordinator handled it but the answer never arrived."""
        if not c.alive:
            return
        joining = c.epoch == 0
        full = joining or c.full
        hb = Heartbeat(c.name, c.epoch, instance_id=c.instance, rebalance_timeout_ms=60_000 if full else -1,
                       subscribed_topic_names=c.topics if full else None,
                       owned={} if joining else dict(c.owned))
        result, records = self.group.heartbeat(hb, TOPICS, self.now)
        self.records += records
        c.full = lost
        if lost:
            return
        if result.error_code:
            c.owned, c.epoch = {}, 0  # fenced, or its place was taken: give everything up, rejoin
            if c.instance is not None:  # a static instance's place is still held: a new process id
                self.incarnations += 1
                c.name = f"{c.name.split('#')[0]}#{self.incarnations}"
            return
        c.joined = True
        c.epoch = result.member_epoch
        if result.assignment is not None:
            c.owned = dict(result.assignment)

    def leave(self, c: Client) -> None:
        if not (c.alive and c.joined and c.epoch > 0):
            return
        epoch = -2 if c.instance is not None else -1
        result, records = self.group.heartbeat(Heartbeat(c.name, epoch, instance_id=c.instance), TOPICS, self.now)
        self.records += records
        c.owned, c.epoch, c.joined = {}, 0, False
        if c.instance is not None:  # the restarted process comes back under a new member id
            self.incarnations += 1
            c.name = f"{c.name.split('#')[0]}#{self.incarnations}"

    def crash(self, c: Client) -> None:
        c.alive, c.owned = False, {}  # it consumes no more; its session will expire

    def advance(self) -> None:
        """Time passes beyond a session: the live clients heartbeat, the crashed ones expire."""
        self.now += SESSION_MS + 1
        for c in self.clients:
            self.heartbeat(c)
        _, records = self.group.tick(self.now, TOPICS)
        self.records += records

    def check(self) -> None:
        owners: dict[tuple[str, int], str] = {}
        for c in self.clients:
            if not c.alive:
                continue
            for t, ps in c.owned.items():
                for p in ps:
                    assert (t, p) not in owners, f"{t}-{p} owned by {owners[(t, p)]} and {c.name}"
                    owners[(t, p)] = c.name
        held: dict[tuple[str, int], str] = {}
        for m in self.group.members.values():
            for part in (m.assignment.assigned, m.assignment.pending_revocation):
                for t, ps in part.items():
                    for p in ps:
                        assert (t, p) not in held, f"{t}-{p} held by {held[(t, p)]} and {m.member_id}"
                        held[(t, p)] = m.member_id
        fresh = ConsumerGroupState("g")
        for record in self.records:
            fresh.replay(record)
        assert (fresh.group_epoch, fresh.assignment_epoch, fresh.target) == (
            self.group.group_epoch, self.group.assignment_epoch, self.group.target)
        assert {k: (m.metadata, m.assignment) for k, m in fresh.members.items()} == {
            k: (m.metadata, m.assignment) for k, m in self.group.members.items()}


ops = st.lists(st.tuples(st.sampled_from(["hb", "hb", "hb", "lost", "leave", "crash", "advance", "revive"]),
                         st.integers(0, 4)), max_size=60)


@settings(max_examples=1000, deadline=None)
@given(ops, st.integers(0, 2), st.booleans(), st.sampled_from(["uniform", "range"]))
def test_random_schedules_keep_kafkas_promises(schedule, subscription, static, assignor) -> None:
    world = World(assignor)
    for op, index in schedule:
        c = world.client(index, subscription, static and index % 2 == 0)
        if op in ("hb", "lost"):
            world.heartbeat(c, lost=op == "lost")
        elif op == "leave":
            world.leave(c)
        elif op == "crash":
            world.crash(c)
        elif op == "revive" and not c.alive:  # a new process under a new member id
            world.incarnations += 1
            c.alive, c.epoch, c.joined, c.name = True, 0, False, f"{c.name.split('#')[0]}#{world.incarnations}"
        else:
            world.advance()
        world.check()
    # Progress: a few rounds of heartbeats from everybody alive settle the group.
    world.advance()
    for _ in range(6):
        for c in world.clients:
            world.heartbeat(c)
        world.check()
    live = [c for c in world.clients if c.alive]
    if not live:
        return
    assert world.group.describe_state() == "Stable", [
        (m.member_id, m.assignment) for m in world.group.members.values()]
    wanted = {(TOPICS[t].topic_id, p) for c in live for t in c.topics for p in range(TOPICS[t].partitions)}
    owned = {(t, p) for c in live for t, ps in c.owned.items() for p in ps}
    assert owned == wanted
