"""The pure cores' self-checks (`_check_invariants`) fail loudly on a broken state: each
check here breaks one invariant on purpose and expects the AssertionError that names it.
(That they hold is shown by every other test of the cores, which runs them on each transition.)"""

from __future__ import annotations

import pytest

from raftka.broker.txn import txn_state as ts


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
