"""Static membership (KIP-345) in the group state machine, with explicit clocks.

A static member carries a `group.instance.id`; restarting it must not cost the
group a rebalance, and the process it replaced must be fenced.
"""

from __future__ import annotations

import itertools

import pytest

from raftka.broker.group.group_state import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupPhase,
    GroupState,
    Member,
    SyncResult,
    same_subscription,
)
from raftka.client.group_protocol import Subscription, encode_subscription
from raftka.client.records import TopicPartition

SESSION = 10_000
REBALANCE = 30_000


def sub(*topics: str, owned: tuple[TopicPartition, ...] = (), generation: int = -1) -> bytes:
    return encode_subscription(Subscription(tuple(topics), None, owned, generation), version=2)


ORDERS = (("range", sub("orders")),)


def make_group() -> GroupState:
    counter = itertools.count(1)
    return GroupState("g", new_member_id=lambda prefix: f"{prefix}-{next(counter)}")


def join(group, member_id="", *, now=0, instance=None, protocols=ORDERS, session=SESSION, known=True):
    return group.join(member_id, client_id="c", client_host="/127.0.0.1", session_timeout_ms=session,
                      rebalance_timeout_ms=REBALANCE, protocol_type="consumer", protocols=protocols,
                      now_ms=now, require_known_member_id=known, group_instance_id=instance)


def answers(replies, kind):
    return {r.member_id: r.result for r in replies if r.kind == kind}


def stable_group(protocols=ORDERS) -> tuple[GroupState, str, str]:
    """Stable generation 2: `a` is static (instance "ia") and leads, `b` is dynamic."""
    group = make_group()
    a, replies = join(group, instance="ia", now=0, protocols=protocols)
    assert answers(replies, "join")[a].error_code == NONE, "a static member needs no MEMBER_ID_REQUIRED"
    assert a.startswith("ia-")
    b, replies = join(group, now=1, protocols=protocols)
    assert answers(replies, "join")[b].error_code != NONE  # MEMBER_ID_REQUIRED for the dynamic one
    join(group, b, now=1, protocols=protocols)
    _, replies = join(group, a, instance="ia", now=2, protocols=protocols)
    assert set(answers(replies, "join")) == {a, b}
    group.sync(b, 2, {}, 3)
    synced = answers(group.sync(a, 2, {a: b"A", b: b"B"}, 3, "ia"), "sync")
    assert synced[a] == SyncResult(NONE, b"A", "consumer", "range") and group.phase is GroupPhase.STABLE
    return group, a, b


def test_restarted_static_member_takes_over_without_a_rebalance():
    group, a, b = stable_group()
    revision = group.revision
    a2, replies = join(group, instance="ia", now=100)
    (reply,) = replies
    result = reply.result
    assert (reply.kind, reply.member_id, result.error_code) == ("join", a2, NONE)
    assert a2 != a and group.static_member_id("ia") == a2
    # Same generation, and the old leader id: the newcomer must not compute an assignment.
    assert (result.generation_id, result.leader, result.members) == (2, a, ())
    assert group.phase is GroupPhase.STABLE and group.leader_id == a2
    assert group.revision == revision + 1, "the coordinator must persist the new member id"
    assert answers(group.sync(a2, 2, {}, 101, "ia"), "sync")[a2] == SyncResult(NONE, b"A", "consumer", "range")
    assert group.heartbeat(b, 2, 102) == NONE, "the other member saw no rebalance"


def test_owned_partitions_in_the_metadata_do_not_count_as_a_change():
    group, a, b = stable_group()
    rejoin = (("range", sub("orders", owned=(TopicPartition("orders", 0),), generation=2)),)
    a2, replies = join(group, instance="ia", protocols=rejoin, now=100)
    assert answers(replies, "join")[a2].generation_id == 2 and group.phase is GroupPhase.STABLE


BOTH = (("range", sub("orders")), ("roundrobin", sub("orders")))


@pytest.mark.parametrize("protocols", [
    (("range", sub("orders", "refunds")), ("roundrobin", sub("orders", "refunds"))),  # a new topic
    (("roundrobin", sub("orders")),),  # the group's assignor would change
], ids=["new-topic", "new-assignor"])
def test_restart_with_a_changed_subscription_rebalances(protocols):
    group, a, b = stable_group(BOTH)
    a2, replies = join(group, instance="ia", protocols=protocols, now=100)
    assert replies == [] and group.phase is GroupPhase.PREPARING_REBALANCE
    assert group.heartbeat(b, 2, 101) == REBALANCE_IN_PROGRESS
    _, replies = join(group, b, now=102, protocols=BOTH)
    joined = answers(replies, "join")
    assert set(joined) == {a2, b} and joined[a2].generation_id == 3


# The replaced process keeps sending requests with its old member id: each is fenced.
FENCED_CALLS = {
    "heartbeat": lambda g, old: g.heartbeat(old, 2, 200, "ia"),
    "sync": lambda g, old: answers(g.sync(old, 2, {}, 200, "ia"), "sync")[old].error_code,
    "commit": lambda g, old: g.validate_commit(old, 2, 200, "ia"),
    "join": lambda g, old: answers(join(g, old, instance="ia", now=200)[1], "join")[old].error_code,
    "leave": lambda g, old: g.leave(old, 200, "ia")[0],
}


@pytest.mark.parametrize("call", sorted(FENCED_CALLS))
def test_the_replaced_member_id_is_fenced(call):
    group, a, b = stable_group()
    a2, _ = join(group, instance="ia", now=100)
    assert FENCED_CALLS[call](group, a) == FENCED_INSTANCE_ID
    assert group.static_member_id("ia") == a2 and group.phase is GroupPhase.STABLE


@pytest.mark.parametrize(("call", "expected"), [
    ("heartbeat", NONE), ("commit", NONE), ("leave", NONE),
    ("sync", NONE),
])
def test_the_current_static_member_id_is_not_fenced(call, expected):
    group, a, b = stable_group()
    assert FENCED_CALLS[call](group, a) == expected


def test_without_the_instance_id_a_stale_member_id_is_just_unknown():
    group, a, b = stable_group()
    join(group, instance="ia", now=100)
    assert group.heartbeat(a, 2, 101) == UNKNOWN_MEMBER_ID
    assert group.validate_commit(a, 2, 101) == UNKNOWN_MEMBER_ID


def test_known_member_id_with_an_unknown_instance_must_rejoin_afresh():
    group, a, b = stable_group()
    _, replies = join(group, b, instance="never-seen", now=10)
    assert answers(replies, "join")[b].error_code == UNKNOWN_MEMBER_ID


def test_a_silent_static_member_leaves_only_at_its_session_timeout():
    group, a, b = stable_group()
    # a's process stopped after t=3 (static members send no LeaveGroup); b keeps heartbeating.
    for now in (3_000, 6_000, 9_000, 12_000):
        group.heartbeat(b, 2, now)
        replies, removed = group.tick(now)
        if now < 3 + SESSION:
            assert removed == [] and group.phase is GroupPhase.STABLE, f"rebalanced early at t={now}"
    assert removed == [a] and group.phase is GroupPhase.PREPARING_REBALANCE
    assert group.static_member_id("ia") is None


def test_a_rebalance_keeps_a_static_member_that_has_not_rejoined_yet():
    group, a, b = stable_group()
    c, replies = join(group, now=100)  # a newcomer starts a rebalance
    join(group, c, now=100)
    _, replies = join(group, b, now=101)
    assert replies == []  # still waiting for a
    group.heartbeat(a, 2, 100 + REBALANCE - 1)  # a is alive but slow to rejoin
    replies, removed = group.tick(100 + REBALANCE)
    # Dynamic members that did not rejoin would be gone now; the static one stays.
    assert removed == [] and a in group.members
    joined = answers(replies, "join")
    assert set(joined) == {a, b, c} and group.phase is GroupPhase.COMPLETING_REBALANCE
    leader = group.leader_id
    assert leader in (b, c), "a member that did not rejoin cannot lead"
    assert {m.member_id for m in joined[leader].members} == {a, b, c}


def test_replacement_during_a_rebalance_fences_the_parked_join():
    group, a, b = stable_group()
    c, _ = join(group, now=101)
    join(group, c, now=101)  # a newcomer: PreparingRebalance
    _, replies = join(group, a, instance="ia", now=102)  # the old process rejoins and parks
    assert replies == []
    a2, replies = join(group, instance="ia", now=103)  # its replacement arrives
    assert answers(replies, "join")[a].error_code == FENCED_INSTANCE_ID
    _, replies = join(group, b, now=104)
    joined = answers(replies, "join")
    assert set(joined) == {a2, b, c} and all(r.error_code == NONE for r in joined.values())
    assert group.leader_id == a2, "the replacement inherits the leadership"


def test_replacement_while_completing_fences_the_parked_sync_and_rebalances():
    group = make_group()
    b, _ = join(group, now=0)
    _, replies = join(group, b, now=0)  # b alone: generation 1, b leads
    group.sync(b, 1, {b: b"B"}, 0)
    a, _ = join(group, instance="ia", now=1)
    _, replies = join(group, b, now=2)
    assert group.phase is GroupPhase.COMPLETING_REBALANCE and group.leader_id == b
    assert group.sync(a, 2, {}, 3, "ia") == []  # a follower waits for the leader's assignment
    a2, replies = join(group, instance="ia", now=4)
    assert answers(replies, "sync")[a] == SyncResult(FENCED_INSTANCE_ID)
    assert group.phase is GroupPhase.PREPARING_REBALANCE and a2 in group.members and a not in group.members


def test_leave_by_instance_id_alone_removes_the_static_member():
    group, a, b = stable_group()
    assert group.leave("", 10, "nope")[0] == UNKNOWN_MEMBER_ID
    code, _ = group.leave("", 10, "ia")
    assert code == NONE and a not in group.members and group.phase is GroupPhase.PREPARING_REBALANCE


def test_a_pending_dynamic_member_may_leave():
    group, a, b = stable_group()
    pending, _ = join(group, now=10)  # got MEMBER_ID_REQUIRED, never came back
    assert pending in group.pending_members
    assert group.leave(pending, 11)[0] == NONE and pending not in group.pending_members


def test_a_restored_static_member_is_replaced_after_failover():
    group = make_group()
    member = Member("ia-old", "c", "/h", SESSION, REBALANCE, "consumer", ORDERS, "ia", b"asg")
    group.restore(protocol_type="consumer", generation_id=5, protocol_name="range", leader_id="ia-old",
                  members=[member], now_ms=0)
    new_id, replies = join(group, instance="ia", now=10)
    assert answers(replies, "join")[new_id].generation_id == 5
    assert answers(group.sync(new_id, 5, {}, 11, "ia"), "sync")[new_id] == SyncResult(NONE, b"asg", "consumer", "range")
    assert group.heartbeat("ia-old", 5, 12, "ia") == FENCED_INSTANCE_ID
    assert group.heartbeat(new_id, 4, 12, "ia") == ILLEGAL_GENERATION


def test_same_subscription_compares_topics_not_ownership():
    owned = (("cooperative-sticky", sub("t", owned=(TopicPartition("t", 1),), generation=7)),)
    assert same_subscription("consumer", (("cooperative-sticky", sub("t")),), owned)
    assert not same_subscription("consumer", (("cooperative-sticky", sub("t")),),
                                 (("cooperative-sticky", sub("u")),))
    assert same_subscription("connect", (("x", b"\x01"),), (("x", b"\x01"),))
    assert not same_subscription("connect", (("x", b"\x01"),), (("x", b"\x02"),))


def test_static_member_expires_exactly_at_its_session_deadline():
    """The core names the instant its session ends (the shell sets a timer there); a tick a
    hair before it keeps the member, a tick at it removes it."""
    group, a, b = stable_group()
    assert group.heartbeat(a, 2, 2_500, "ia") == NONE
    assert group.heartbeat(b, 2, 4_000) == NONE
    assert group.next_deadline_ms() == 2_500 + SESSION  # a's session ends first
    replies, removed = group.tick(2_500 + SESSION - 0.001)
    assert removed == [] and a in group.members
    replies, removed = group.tick(2_500 + SESSION)
    assert removed == [a]
    # The rebalance it caused has its own deadline: b's session still runs while b is not
    # parked in JoinGroup, and the join phase ends at the rebalance timeout.
    assert group.phase is GroupPhase.PREPARING_REBALANCE
    assert group.next_deadline_ms() == min(4_000 + SESSION, 2_500 + SESSION + REBALANCE)


@pytest.mark.parametrize(("setup", "expected"), [
    ("empty", None),
    ("stable", 3 + SESSION),  # both members synced at 3
    ("completing", 2 + REBALANCE),  # after the join phase: the sync deadline (sessions end later)
])
def test_next_deadline_per_phase(setup, expected):
    if setup == "empty":
        group = make_group()
    elif setup == "stable":
        group, _, _ = stable_group()
    else:
        group = make_group()
        a, _ = join(group, instance="ia", now=2, session=REBALANCE + 1)
        assert group.phase is GroupPhase.COMPLETING_REBALANCE
    assert group.next_deadline_ms() == expected
