"""Which committed offsets have expired, and whether their group goes with them (pure).

Kafka 4.4's rules (`OffsetMetadataManager.cleanupExpiredOffsets`, the groups'
`offsetExpirationCondition`, `GroupMetadataManager.maybeDeleteGroup`), run by the
coordinator every `offsets.retention.check.interval.ms` for each group it serves:

- Each group says from when an offset's retention counts (its *base*), or that none
  of its offsets may expire now:
  - a classic group with a protocol type, Empty: from when the group became Empty
    (its state timestamp), or from the commit when that is unknown (metadata without it);
  - a classic group of the "consumer" protocol, Stable, whose members' subscriptions
    are known: from the commit;
  - a classic group in any other state (rebalancing, or Stable with another protocol):
    no offset expires;
  - a group without a protocol type (only standalone commits: `assign()` consumers,
    admin tools): from the commit;
  - a KIP-848 consumer group, whatever its state: from the commit.
- Only offsets of topics the group does not subscribe to expire (KIP-496; an Empty
  group subscribes to nothing), once `now - base >= offsets.retention.minutes`, and
  not while an open transaction holds an offset for that partition.
- When every offset expired (or the group had none) and no transaction of the group
  is open, an empty group is deleted: a group tombstone, so it leaves ListGroups and
  DescribeGroups answers GROUP_ID_NOT_FOUND. A group whose offsets may not expire
  now is never deleted, nor one with members.

raftka writes OffsetCommitValue v3 (no per-offset expire timestamp), so Kafka's
pre-2.1 explicit expiry (OffsetCommit v2-v4 `retention_time_ms`) does not arise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from raftka.broker.group.consumer_group_state import ConsumerGroupState
from raftka.broker.group.group_state import CommittedOffset, GroupPhase, GroupState
from raftka.client.group_protocol import PROTOCOL_TYPE, decode_subscription

TopicPartition = tuple[str, int]
# From when an offset's retention counts (ms since the epoch); None: no offset expires now.
Base = Callable[[CommittedOffset], float] | None


@dataclass(frozen=True)
class Expiry:
    """One group's cleanup: the offsets to tombstone, and whether the group itself goes."""

    expired: tuple[TopicPartition, ...] = ()
    delete_group: bool = False


def _commit_time(offset: CommittedOffset) -> float:
    return offset.commit_timestamp_ms


def decide(offsets: Mapping[TopicPartition, CommittedOffset], base: Base, subscribed: Collection[str],
           *, is_empty: bool, now_ms: float, retention_ms: int,
           pending: Collection[TopicPartition] = ()) -> Expiry:
    """The cleanup of one group: `base` its expiration condition, `subscribed` the topics its
    members subscribe to, `pending` its partitions an open transaction holds an offset for."""
    if not offsets:  # nothing to expire: an empty group with no transaction goes
        return Expiry((), is_empty and not pending)
    if base is None:
        return Expiry()
    expired = tuple(sorted(
        tp for tp, offset in offsets.items()
        if tp[0] not in subscribed and tp not in pending and now_ms - base(offset) >= retention_ms))
    everything = len(expired) == len(offsets) and not pending
    return Expiry(expired, everything and is_empty)


def classic_subscriptions(group: GroupState) -> frozenset[str] | None:
    """Kafka's `ClassicGroup.subscribedTopics`: for the "consumer" protocol, the topics the
    members subscribe to in the chosen protocol (none for an empty group); None when unknown
    (another protocol, or a subscription that does not decode)."""
    if group.protocol_type != PROTOCOL_TYPE:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics.update(decode_subscription(member.metadata_for(group.protocol_name)).topics)
        except ValueError:
            return None
    return frozenset(topics)


def classic_base(group: GroupState, state_timestamp_ms: float | None) -> Base:
    """Kafka's `ClassicGroup.offsetExpirationCondition` (see the module docstring);
    `state_timestamp_ms` is when the group entered its phase, on the commits' clock."""
    if not group.protocol_type:
        return _commit_time
    if group.phase is GroupPhase.EMPTY:
        became_empty = state_timestamp_ms
        if became_empty is None:
            return _commit_time
        return lambda _offset: became_empty
    if (group.protocol_type == PROTOCOL_TYPE and group.phase is GroupPhase.STABLE
            and classic_subscriptions(group) is not None):
        return _commit_time
    return None


def expire_classic(group: GroupState, now_ms: float, retention_ms: int,
                   pending: Collection[TopicPartition] = (), state_timestamp_ms: float | None = None) -> Expiry:
    """`now_ms`, `state_timestamp_ms` (see `classic_base`) and the commit timestamps are
    wall-clock times (GroupState's own `state_timestamp_ms` is on its caller's clock)."""
    return decide(group.offsets, classic_base(group, state_timestamp_ms), classic_subscriptions(group) or frozenset(),
                  is_empty=group.phase is GroupPhase.EMPTY, now_ms=now_ms, retention_ms=retention_ms,
                  pending=pending)


def expire_consumer(group: ConsumerGroupState, now_ms: float, retention_ms: int,
                    pending: Collection[TopicPartition] = ()) -> Expiry:
    return decide(group.offsets, _commit_time, group.subscribed_topics(), is_empty=group.is_empty,
                  now_ms=now_ms, retention_ms=retention_ms, pending=pending)
