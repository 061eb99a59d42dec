"""The pure cores' self-checks (`_check_invariants`) fail loudly on a broken state: each
check here breaks one invariant on purpose and expects the AssertionError that names it.
(That they hold is shown by every other test of the cores, which runs them on each transition.)"""

from __future__ import annotations

import pytest

from raftka.broker.group.group_state import GroupPhase, GroupState
from raftka.broker.replication.replica_state import FollowerState, PartitionAssignment, ReplicaState
from raftka.broker.txn import txn_state as ts
from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.records import (
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)


def _txn(state: ts.TxnState, epoch: int = 0, partitions=frozenset()) -> ts.TxnMetadata:
    return ts.TxnMetadata("t", 1000, epoch, 60000, state, frozenset(partitions))


@pytest.mark.parametrize("before, after", [
    (ts.TxnState.EMPTY, ts.TxnState.PREPARE_COMMIT),
    (ts.TxnState.ONGOING, ts.TxnState.COMPLETE_COMMIT),
    (ts.TxnState.PREPARE_COMMIT, ts.TxnState.COMPLETE_ABORT),
    (ts.TxnState.PREPARE_ABORT, ts.TxnState.ONGOING),
    (ts.TxnState.ONGOING, ts.TxnState.DEAD),
])
def test_txn_transition_outside_kafkas_table(before, after) -> None:
    with pytest.raises(AssertionError, match="is not a transition of Kafka's TransactionState"):
        _txn(before).to(after, 0)


def test_txn_epoch_never_goes_back() -> None:
    with pytest.raises(AssertionError, match="epoch went back from 3 to 2"):
        _txn(ts.TxnState.EMPTY, epoch=3).to(ts.TxnState.EMPTY, 0, producer_epoch=2)


def test_txn_completed_state_holds_no_partitions() -> None:
    with pytest.raises(AssertionError, match="CompleteCommit holds partitions"):
        _txn(ts.TxnState.PREPARE_COMMIT, partitions={("foo", 0)}).to(ts.TxnState.COMPLETE_COMMIT, 0)


def test_txn_kafkas_transitions_pass() -> None:
    for after, befores in ts.VALID_PREVIOUS.items():
        for before in befores:
            _txn(before).to(after, 0)


# --- controller decisions ----------------------------------------------------------------

def _cluster_with_topic():
    listeners = (("PLAINTEXT", "h", 1),)
    records = [RegisterBroker(b, f"inc{b}", listeners) for b in (1, 2, 3)]
    records += [UnfenceBroker(b, b) for b in (1, 2)]  # broker 3 stays fenced
    records += [Topic("t", "tid"), Partition("tid", 0, (1, 2, 3), (1, 2), 1)]
    return replay(list(enumerate(records, start=1)))


@pytest.mark.parametrize("change, broken", [
    (dict(isr=(1, 4)), "ISR \\[1, 4\\] must be a non-empty set of replicas"),
    (dict(isr=()), "must be a non-empty set of replicas"),
    (dict(leader=3, isr=(2, 3)), "elected leader 3 is not a live broker"),
    (dict(leader=2, isr=(1,)), "leader 2 is not in ISR \\[1\\]"),
    (dict(replicas=(1, 1, 2)), "must be distinct and non-empty"),
    (dict(partition_epoch=7), "not decided on the current partition epoch"),
])
def test_controller_partition_records_keep_the_invariants(change, broken) -> None:
    image = _cluster_with_topic()
    record = PartitionChange("tid", 0, change.pop("partition_epoch", 0), **change)
    with pytest.raises(AssertionError, match=broken):
        cd._check_invariants(image, cd.Decision((record,)))


def test_controller_a_valid_change_passes() -> None:
    cd._check_invariants(_cluster_with_topic(), cd.Decision((PartitionChange("tid", 0, 0, leader=2, isr=(2,)),)))


def test_controller_decisions_run_the_check(monkeypatch) -> None:
    """The public decisions are wrapped: a decision that breaks an invariant raises."""

    def elect_outside_the_isr(builder, image, topic_id, index, part, *args) -> None:
        builder.records.append(PartitionChange(topic_id, index, part.partition_epoch, leader=3))

    monkeypatch.setattr(cd, "_rebalance_partition", elect_outside_the_isr)
    with pytest.raises(AssertionError, match="leader 3 is not in ISR"):
        cd.fence_broker(_cluster_with_topic(), 1, False)


# --- replica_state -----------------------------------------------------------------------

def _leader() -> ReplicaState:
    state = ReplicaState(1, 30000)
    state.apply(PartitionAssignment((1, 2, 3), (1, 2, 3), 1, 1, 0), min_insync_replicas=1, now_ms=0,
                log_end_offset=0, epoch_start_offset=0)
    return state


def test_replica_leader_in_its_isr() -> None:
    state = ReplicaState(1, 30000)
    with pytest.raises(AssertionError, match="the leader is not in ISR \\[2, 3\\]"):
        state.apply(PartitionAssignment((1, 2, 3), (2, 3), 1, 1, 0), min_insync_replicas=1, now_ms=0,
                    log_end_offset=0, epoch_start_offset=0)


def test_replica_isr_within_replicas() -> None:
    state = ReplicaState(2, 30000)
    with pytest.raises(AssertionError, match="ISR \\[1, 4\\] not within replicas"):
        state.apply(PartitionAssignment((1, 2), (1, 4), 1, 1, 0), min_insync_replicas=1, now_ms=0,
                    log_end_offset=0, epoch_start_offset=0)


def test_replica_high_watermark_within_the_log() -> None:
    state = _leader()
    state.on_append(10, 1)
    state.high_watermark = 11  # as a bug in a transition would leave it
    with pytest.raises(AssertionError, match="HW 11 > log end 10"):
        state.on_append(10, 2)


def test_replica_pending_isr_keeps_the_leader() -> None:
    state = _leader()
    state.pending_isr = (2, 3)
    with pytest.raises(AssertionError, match="pending ISR \\[2, 3\\] must hold the leader"):
        state.on_append(5, 1)


def test_replica_follower_states_are_the_other_replicas() -> None:
    state = _leader()
    del state.followers[3]
    with pytest.raises(AssertionError, match="follower states \\[2\\] are not the other replicas"):
        state.on_fetch(2, 0, 1)


def test_replica_a_follower_tracks_no_followers() -> None:
    state = ReplicaState(2, 30000)
    state.apply(PartitionAssignment((1, 2), (1, 2), 1, 1, 0), min_insync_replicas=1, now_ms=0,
                log_end_offset=0, epoch_start_offset=0)
    state.followers[1] = FollowerState()
    with pytest.raises(AssertionError, match="not leading but tracks followers \\[1\\]"):
        state.on_leader_high_watermark(0, 0)


# --- group_state (classic groups) --------------------------------------------------------

def _stable_group() -> GroupState:
    group = GroupState("g", new_member_id=lambda client: f"{client}-1")
    group.join("", client_id="a", client_host="h", session_timeout_ms=10000, rebalance_timeout_ms=30000,
               protocol_type="consumer", protocols=[("range", b"")], now_ms=0)
    group.sync("a-1", 1, {"a-1": b"p0"}, 0)
    assert group.phase is GroupPhase.STABLE
    return group


def test_group_empty_has_no_members() -> None:
    group = _stable_group()
    group.phase = GroupPhase.EMPTY
    with pytest.raises(AssertionError, match="has members \\['a-1'\\]"):
        group.heartbeat("a-1", 1, 1)


def test_group_leader_is_a_member() -> None:
    group = _stable_group()
    group.leader_id = "gone-7"
    with pytest.raises(AssertionError, match="leader 'gone-7' is not a member"):
        group.heartbeat("a-1", 1, 1)


def test_group_no_leader_without_members() -> None:
    group = GroupState("g")
    group.leader_id = "a-1"
    with pytest.raises(AssertionError, match="leader 'a-1' with members \\[\\]"):
        group.tick(0)


def test_group_stable_parks_no_join() -> None:
    group = _stable_group()
    group.members["a-1"].awaiting_join = True
    with pytest.raises(AssertionError, match="JoinGroup parked for \\['a-1'\\]"):
        group.tick(1)


def test_group_sync_parked_only_while_completing() -> None:
    group = _stable_group()
    group.members["a-1"].awaiting_sync = True
    with pytest.raises(AssertionError, match="SyncGroup parked for \\['a-1'\\]"):
        group.validate_commit("a-1", 1, 1)
