"""An in-memory `Persister` (broker/group/share_persister.py), lost when the node stops.

# TEMPORARY: replaced by the share coordinator's persister at merge.

It lets the share partition manager and its real-socket tests run before the share
coordinator (`__share_group_state`) exists. Nothing may depend on it being in memory.
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
    """Kafka's `Persister` contract, kept in a dict: state epochs and leader epochs fence."""

    def __init__(self) -> None:
        self._states: dict[ShareStateKey, ShareState] = {}

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        self._states[key] = ShareState(state_epoch, start_offset)

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        state = self._states.get(key)
        if state is None:
            return None
        self._check_leader(key, state, leader_epoch)
        if leader_epoch > state.leader_epoch:
            state = ShareState(state.state_epoch, state.start_offset, state.batches, leader_epoch)
            self._states[key] = state
        return state

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[PersistedBatch, ...]) -> None:
        state = self._states.get(key)
        if state is not None:
            if state_epoch < state.state_epoch:
                raise PersisterError(ErrorCode.FENCED_STATE_EPOCH,
                                     f"state epoch {state_epoch} is older than {state.state_epoch}")
            self._check_leader(key, state, leader_epoch)
        self._states[key] = ShareState(state_epoch, start_offset, batches, leader_epoch)

    async def read_summary(self, key: ShareStateKey, leader_epoch: int) -> ShareStateSummary | None:
        state = self._states.get(key)
        return None if state is None else ShareStateSummary(state.state_epoch, state.start_offset, state.leader_epoch)

    async def delete(self, key: ShareStateKey) -> None:
        self._states.pop(key, None)

    @staticmethod
    def _check_leader(key: ShareStateKey, state: ShareState, leader_epoch: int) -> None:
        if leader_epoch < state.leader_epoch:
            raise PersisterError(ErrorCode.FENCED_LEADER_EPOCH,
                                 f"{key.coordinator_key}: leader epoch {leader_epoch} is older than "
                                 f"{state.leader_epoch}")
