"""TxnOffsetCommit's pure core: KIP-447 validation against the group, and the offsets held
pending per (`__consumer_offsets` partition, producer) until the producer's marker."""

from __future__ import annotations

import pytest

from raftka.broker.group.group_state import CommittedOffset, GroupState, Member
from raftka.broker.group.txn_offsets_state import PendingTxnOffsets, validate_txn_commit
from raftka.client.protocol import ErrorCode


def _group(*members: tuple[str, str | None], generation: int = 4) -> GroupState:
    group = GroupState("g", initial_rebalance_delay_ms=0)
    if members:
        group.restore(protocol_type="consumer", generation_id=generation, protocol_name="range", leader_id=members[0][0],
                      members=[Member(member_id=m, client_id="c", client_host="h", session_timeout_ms=10_000,
                                      rebalance_timeout_ms=10_000, protocol_type="consumer",
                                      protocols=(("range", b""),), group_instance_id=i) for m, i in members],
                      now_ms=0)
    return group


@pytest.mark.parametrize(("members", "member_id", "generation", "instance", "expected"), [
    ((), "", -1, None, 0),  # v0-2 style into an empty group
    ((("m1", None),), "", -1, None, 0),  # ... and into a group with members: Kafka accepts it too
    ((("m1", None),), "m1", 4, None, 0),  # KIP-447: the member of the current generation
    ((("m1", None),), "m2", 4, None, ErrorCode.UNKNOWN_MEMBER_ID),
    ((("m1", None),), "m1", 3, None, ErrorCode.ILLEGAL_GENERATION),
    ((("m1", "i1"),), "m9", 4, "i1", ErrorCode.FENCED_INSTANCE_ID),  # instance owned by another member
    ((("m1", "i1"),), "m1", 4, "i1", 0),
    ((), "m1", -1, None, ErrorCode.UNKNOWN_MEMBER_ID),
    ((), "", 0, None, ErrorCode.ILLEGAL_GENERATION),  # generation 0, the now-empty group is at 1
])
def test_validation(members, member_id: str, generation: int, instance, expected: int) -> None:
    group = _group(*members)
    if not members and generation == 0:
        group.generation_id = 1  # a group that has had a generation, now empty
    assert validate_txn_commit(group, member_id, generation, instance) == expected


def test_pending_until_commit_or_abort() -> None:
    pending = PendingTxnOffsets()
    tp = ("t", 0)
    pending.add(3, 100, "g", {tp: CommittedOffset(5)})
    pending.add(3, 200, "g", {tp: CommittedOffset(9)})
    assert pending.is_pending(3, "g", tp) and not pending.is_pending(4, "g", tp)
    assert pending.complete(3, 100, commit=True) == {"g": {tp: CommittedOffset(5)}}
    assert pending.is_pending(3, "g", tp)  # producer 200's is still open
    assert pending.complete(3, 200, commit=False) == {}  # aborted: dropped
    assert not pending.is_pending(3, "g", tp)
    assert pending.complete(3, 200, commit=True) == {}  # a retried marker finds nothing
    pending.install(3, {300: {"g": {tp: CommittedOffset(1)}}})
    assert pending.producers(3) == [300]
    pending.drop_partition(3)
    assert pending.producers(3) == []


def test_a_failed_write_is_forgotten_unless_replaced() -> None:
    pending = PendingTxnOffsets()
    first, second = CommittedOffset(1), CommittedOffset(2)
    pending.add(0, 7, "g", {("t", 0): first, ("t", 1): first})
    pending.add(0, 7, "g", {("t", 1): second})  # a later commit of the same partition
    pending.discard(0, 7, "g", {("t", 0): first, ("t", 1): first})
    assert pending.complete(0, 7, commit=True) == {"g": {("t", 1): second}}
    pending.add(0, 8, "g", {("t", 0): first})
    pending.discard(0, 8, "g", {("t", 0): first})
    assert pending.producers(0) == []
