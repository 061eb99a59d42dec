"""Which offsets expire and which groups go with them (broker/group/offset_expiration.py):
Kafka 4.4's rules, as tables over real GroupState / ConsumerGroupState values."""

from __future__ import annotations

import pytest

from raftka.broker.group.consumer_group_state import (
    ConsumerGroupState,
    MemberMetadata,
    MemberMetadataRecord,
)
from raftka.broker.group.group_metadata_manager import state_timestamp, wall_clock_ms
from raftka.broker.group.group_state import CommittedOffset, GroupPhase, GroupState, Member
from raftka.broker.group.offset_expiration import (
    Expiry,
    classic_subscriptions,
    expire_classic,
    expire_consumer,
)
from raftka.client.group_protocol import Subscription, encode_subscription

MINUTE = 60_000
RETENTION = MINUTE
NOW = 10 * MINUTE
OLD = NOW - RETENTION  # exactly the retention ago: expired (Kafka's >=)
FRESH = NOW - RETENTION + 1  # a millisecond short of it: kept


def _offsets(**stamps: int) -> dict[tuple[str, int], CommittedOffset]:
    """topic -> commit timestamp, each as partition 0."""
    return {(topic, 0): CommittedOffset(5, -1, "", stamp) for topic, stamp in stamps.items()}


def _member(member_id: str, topics: tuple[str, ...] | None, protocol_type: str = "consumer") -> Member:
    metadata = encode_subscription(Subscription(topics)) if topics is not None else b"\xff\xff"
    return Member(member_id, "client", "/127.0.0.1", 10_000, 10_000, protocol_type, (("range", metadata),))


def _classic(phase: GroupPhase, offsets, *, protocol_type: str | None = "consumer",
             subscribed: tuple[str, ...] | None = ("a",)) -> GroupState:
    group = GroupState("g")
    members = [_member("m1", subscribed, protocol_type or "")] if phase is not GroupPhase.EMPTY else []
    group.restore(protocol_type=protocol_type, generation_id=3, protocol_name="range",
                  leader_id="m1" if members else None, members=members, now_ms=NOW)
    group.phase = phase
    group.offsets.update(offsets)
    return group


CLASSIC_CASES = [
    # Empty: retention counts from when the group became Empty, whatever the commit times.
    ("empty, emptied long ago: everything goes", GroupPhase.EMPTY, _offsets(a=NOW, b=NOW),
     dict(state_ts=OLD), {}, Expiry((("a", 0), ("b", 0)), True)),
    ("empty, emptied just now: old commits stay", GroupPhase.EMPTY, _offsets(a=0, b=0),
     dict(state_ts=FRESH), {}, Expiry()),
    ("empty, no state timestamp: from each commit", GroupPhase.EMPTY, _offsets(a=OLD, b=FRESH),
     dict(state_ts=None), {}, Expiry((("a", 0),), False)),
    ("empty, another protocol type: same rule", GroupPhase.EMPTY, _offsets(a=NOW),
     dict(state_ts=OLD, protocol_type="connect"), {}, Expiry((("a", 0),), True)),
    ("standalone commits: from each commit", GroupPhase.EMPTY, _offsets(a=OLD, b=FRESH),
     dict(state_ts=NOW, protocol_type=None), {}, Expiry((("a", 0),), False)),
    ("standalone, all old: the group goes too", GroupPhase.EMPTY, _offsets(a=OLD, b=0),
     dict(state_ts=NOW, protocol_type=None), {}, Expiry((("a", 0), ("b", 0)), True)),
    ("empty with no offsets: deleted", GroupPhase.EMPTY, {}, dict(state_ts=NOW), {}, Expiry((), True)),
    # KIP-496: a Stable consumer-protocol group loses only offsets of topics nobody subscribes to.
    ("stable: unsubscribed topic expires, subscribed stays", GroupPhase.STABLE, _offsets(a=0, b=OLD, c=FRESH),
     dict(subscribed=("a",)), {}, Expiry((("b", 0),), False)),
    ("stable, every offset unsubscribed and old: the group stays (members)", GroupPhase.STABLE,
     _offsets(b=0), dict(subscribed=("a",)), {}, Expiry((("b", 0),), False)),
    ("stable, subscription unreadable: nothing expires", GroupPhase.STABLE, _offsets(b=0),
     dict(subscribed=None), {}, Expiry()),
    ("stable, another protocol: nothing expires", GroupPhase.STABLE, _offsets(b=0),
     dict(protocol_type="connect"), {}, Expiry()),
    ("rebalancing: nothing expires", GroupPhase.PREPARING_REBALANCE, _offsets(b=0), {}, {}, Expiry()),
    ("completing a rebalance: nothing expires", GroupPhase.COMPLETING_REBALANCE, _offsets(b=0), {}, {},
     Expiry()),
    ("rebalancing without offsets: not deleted", GroupPhase.PREPARING_REBALANCE, {}, {}, {}, Expiry()),
    # Open transactions hold their partitions, and the group.
    ("a pending transactional offset keeps its partition and the group", GroupPhase.EMPTY,
     _offsets(a=0, b=0), dict(state_ts=OLD), dict(pending={("b", 0)}), Expiry((("a", 0),), False)),
    ("an open transaction keeps an empty group without offsets", GroupPhase.EMPTY, {},
     dict(state_ts=OLD), dict(pending={("a", 0)}), Expiry()),
]


@pytest.mark.parametrize(("phase", "offsets", "shape", "extra", "expected"),
                         [c[1:] for c in CLASSIC_CASES], ids=[c[0] for c in CLASSIC_CASES])
def test_classic_groups(phase, offsets, shape, extra, expected) -> None:
    """`state_ts`: when the group entered its phase (on the commits' clock)."""
    shape = dict(shape)
    state_ts = shape.pop("state_ts", None)
    group = _classic(phase, offsets, **shape)
    assert expire_classic(group, NOW, RETENTION, extra.get("pending", ()), state_ts) == expected


def test_the_subscriptions_of_a_classic_group() -> None:
    group = _classic(GroupPhase.STABLE, {}, subscribed=("b", "a"))
    assert classic_subscriptions(group) == {"a", "b"}
    assert classic_subscriptions(_classic(GroupPhase.EMPTY, {})) == frozenset()
    assert classic_subscriptions(_classic(GroupPhase.STABLE, {}, subscribed=None)) is None
    assert classic_subscriptions(_classic(GroupPhase.EMPTY, {}, protocol_type=None)) is None


def _consumer(offsets, subscribed: tuple[str, ...] | None) -> ConsumerGroupState:
    group = ConsumerGroupState("g")
    if subscribed is not None:
        group.replay(MemberMetadataRecord("m1", MemberMetadata(subscribed_topic_names=subscribed)))
    group.offsets.update(offsets)
    return group


CONSUMER_CASES = [
    ("members: unsubscribed old offsets go, the group stays", _offsets(a=0, b=OLD, c=FRESH), ("a",), (),
     Expiry((("b", 0),), False)),
    ("empty: old offsets go, and the group", _offsets(a=OLD, b=0), None, (), Expiry((("a", 0), ("b", 0)), True)),
    ("empty, one fresh offset: the group stays", _offsets(a=OLD, b=FRESH), None, (), Expiry((("a", 0),), False)),
    ("empty without offsets: deleted", {}, None, (), Expiry((), True)),
    ("empty, a pending transactional offset", _offsets(a=OLD), None, ({("a", 0)}), Expiry()),
]


@pytest.mark.parametrize(("offsets", "subscribed", "pending", "expected"),
                         [c[1:] for c in CONSUMER_CASES], ids=[c[0] for c in CONSUMER_CASES])
def test_consumer_groups(offsets, subscribed, pending, expected) -> None:
    assert expire_consumer(_consumer(offsets, subscribed), NOW, RETENTION, pending) == expected


def test_leaving_stamps_when_the_group_became_empty() -> None:
    """The base of an Empty group's expiry is set by the state machine when the last member
    leaves (and is what its metadata record stores)."""
    group = GroupState("g")
    protocols = [("range", encode_subscription(Subscription(("a",))))]
    join = group.join("", client_id="c", client_host="/h", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                      protocol_type="consumer", protocols=protocols, now_ms=1_000, require_known_member_id=False)
    member_id = join[0]
    group.tick(1_000)
    group.sync(member_id, group.generation_id, {}, 2_000)
    assert group.phase is GroupPhase.STABLE
    group.leave(member_id, 5_000)
    assert (group.phase, group.state_timestamp_ms) == (GroupPhase.EMPTY, 5_000)


def test_a_stored_state_timestamp_comes_back_on_the_coordinators_clock() -> None:
    """A group metadata record stores wall-clock time; the loaded group keeps it on trio's
    clock (here 1 000 000 ms). Kafka's -1, or raftka's old monotonic stamps, mean unknown."""
    ago = wall_clock_ms() - 5_000
    assert state_timestamp(int(ago), 1_000_000) == pytest.approx(995_000, abs=1_000)
    assert state_timestamp(-1, 1_000_000) is None
    assert state_timestamp(123_456_789, 1_000_000) is None  # a monotonic clock's reading
