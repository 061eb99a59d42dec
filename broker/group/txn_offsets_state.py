"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447): validation and the pending store.

Pure: no trio, no files. The group coordinator writes a TxnOffsetCommit's offsets
to the group's `__consumer_offsets` partition as one transactional batch and
keeps them here, *pending*, per (partition, producer id), until the producer's
marker reaches that partition: COMMIT materialises them (the group's committed
offsets, visible to OffsetFetch), ABORT drops them. A coordinator that loads the
partition replays the same (broker/group/group_metadata_manager.py) and installs the
still-undecided ones.

Validation is Kafka's GroupCoordinator.doTxnCommitOffsets (KIP-447): a dead group
15; an instance id owned by another member 82; a member id the group does not
know 25; a generation >= 0 other than the group's 22; else accepted — generation
-1 with no member id (what v0-2 send) even into a group with members.
"""

from __future__ import annotations

from raftka.broker.group.group_state import CommittedOffset, GroupPhase, GroupState
from raftka.client.protocol import ErrorCode

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, CommittedOffset]


def validate_txn_commit(group: GroupState, member_id: str, generation_id: int,
                        group_instance_id: str | None) -> int:
    """The error for a TxnOffsetCommit into `group` (0 to accept)."""
    if group.phase is GroupPhase.DEAD:
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if group_instance_id is not None:
        owner = group.static_member_id(group_instance_id)
        if owner is not None and owner != member_id:
            return int(ErrorCode.FENCED_INSTANCE_ID)
    if member_id and member_id not in group.members:
        return int(ErrorCode.UNKNOWN_MEMBER_ID)
    if generation_id >= 0 and generation_id != group.generation_id:
        return int(ErrorCode.ILLEGAL_GENERATION)
    return 0


class PendingTxnOffsets:
    """Offsets written by open transactions: `__consumer_offsets` partition -> producer id ->
    group -> partition -> offset."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[int, dict[str, Offsets]]] = {}

    def add(self, partition: int, producer_id: int, group_id: str, offsets: Offsets) -> None:
        by_group = self._pending.setdefault(partition, {}).setdefault(producer_id, {})
        by_group.setdefault(group_id, {}).update(offsets)

    def discard(self, partition: int, producer_id: int, group_id: str, offsets: Offsets) -> None:
        """A failed write: forget those of `offsets` still held exactly as added."""
        held = self._pending.get(partition, {}).get(producer_id, {}).get(group_id)
        if held is None:
            return
        for tp, offset in offsets.items():
            if held.get(tp) is offset:
                del held[tp]
        if not held:
            del self._pending[partition][producer_id][group_id]
            if not self._pending[partition][producer_id]:
                del self._pending[partition][producer_id]

    def install(self, partition: int, pending: dict[int, dict[str, Offsets]]) -> None:
        """The undecided offsets a load of `partition` found (replacing what was held)."""
        self._pending[partition] = {pid: {g: dict(o) for g, o in groups.items()} for pid, groups in pending.items()}

    def complete(self, partition: int, producer_id: int, commit: bool) -> dict[str, Offsets]:
        """The marker arrived: the producer's offsets to materialise per group (none on abort)."""
        held = self._pending.get(partition, {}).pop(producer_id, {})
        return held if commit else {}

    def drop_partition(self, partition: int) -> None:
        """This broker no longer coordinates `partition`'s groups."""
        self._pending.pop(partition, None)

    def is_pending(self, partition: int, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for `tp` of `group_id` (OffsetFetch
        `require_stable` answers UNSTABLE_OFFSET_COMMIT then)."""
        return any(tp in groups.get(group_id, {}) for groups in self._pending.get(partition, {}).values())

    def group_partitions(self, partition: int, group_id: str) -> set[TopicPartition]:
        """The partitions of `group_id` open transactions hold offsets for (empty: none open)."""
        return {tp for groups in self._pending.get(partition, {}).values() for tp in groups.get(group_id, {})}

    def producers(self, partition: int) -> list[int]:
        return sorted(self._pending.get(partition, {}))
