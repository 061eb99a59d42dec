"""A share-state `Persister` kept in this process's memory.

# TEMPORARY: replaced by the share coordinator's persister at merge.

It lets the group coordinator's share groups (and their real-socket tests) run before the
share coordinator (`__share_group_state`) is merged; nothing may depend on it being in
memory. It follows the `Persister` contract of broker/group/share_persister.py: state
epochs fence older writers, a read with an older leader epoch is FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from raftka.broker.group.share_partition_state import PersistedBatch
from raftka.broker.group.share_persister import (
    PersisterError,
    ShareState,
    ShareStateKey,
    ShareStateSummary,
)
from raftka.client.protocol import ErrorCode


class MemoryPersister:
    def __init__(self) -> None:
        self.states: dict[ShareStateKey, ShareState] = {}

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        self.states[key] = ShareState(state_epoch, start_offset)

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        state = self.states.get(key)
        if state is None:
            return None
        if leader_epoch < state.leader_epoch:
            raise PersisterError(int(ErrorCode.FENCED_LEADER_EPOCH),
                                 f"leader epoch {leader_epoch} is older than {state.leader_epoch}")
        state = ShareState(state.state_epoch, state.start_offset, state.batches, leader_epoch)
        self.states[key] = state
        return state

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[PersistedBatch, ...]) -> None:
        state = self.states.get(key)
        if state is not None and state_epoch < state.state_epoch:
            raise PersisterError(int(ErrorCode.FENCED_STATE_EPOCH),
                                 f"state epoch {state_epoch} is older than {state.state_epoch}")
        self.states[key] = ShareState(state_epoch, start_offset, batches, leader_epoch)

    async def read_summary(self, key: ShareStateKey, leader_epoch: int) -> ShareStateSummary | None:
        state = self.states.get(key)
        if state is None:
            return None
        return ShareStateSummary(state.state_epoch, state.start_offset, state.leader_epoch)

    async def delete(self, key: ShareStateKey) -> None:
        self.states.pop(key, None)
