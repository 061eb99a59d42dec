"""The transactional producer's pure state machine and error table (client/transactions.py)."""

from __future__ import annotations

import pytest

from raftka.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    error_for_code,
)
from raftka.client.records import TopicPartition
from raftka.client.transactions import (
    VALID_SOURCES,
    Kind,
    TransactionManager,
    TxnApi,
    TxnState,
    classify,
    worst_error,
)

A = TxnApi

# (api, code, kind): librdkafka's per-response handling (docs/transactions.md).
CLASSIFY = [
    (A.FIND_COORDINATOR, 15, Kind.REFIND),
    (A.FIND_COORDINATOR, 53, Kind.FATAL),
    (A.INIT_PRODUCER_ID, 51, Kind.RETRY),
    (A.INIT_PRODUCER_ID, 14, Kind.RETRY),
    (A.INIT_PRODUCER_ID, 16, Kind.REFIND),
    (A.INIT_PRODUCER_ID, 15, Kind.REFIND),
    (A.INIT_PRODUCER_ID, 47, Kind.FATAL),
    (A.INIT_PRODUCER_ID, 50, Kind.FATAL),
    (A.INIT_PRODUCER_ID, 53, Kind.FATAL),
    (A.INIT_PRODUCER_ID, 90, Kind.FATAL),
    (A.ADD_PARTITIONS, 3, Kind.RETRY),
    (A.ADD_PARTITIONS, 14, Kind.RETRY),
    (A.ADD_PARTITIONS, 16, Kind.REFIND),
    (A.ADD_PARTITIONS, 51, Kind.RETRY),
    (A.ADD_PARTITIONS, 29, Kind.ABORTABLE),
    (A.ADD_PARTITIONS, 55, Kind.ABORTABLE),
    (A.ADD_PARTITIONS, 49, Kind.BUMP),
    (A.ADD_PARTITIONS, 59, Kind.BUMP),
    (A.ADD_PARTITIONS, 47, Kind.FATAL),
    (A.ADD_PARTITIONS, 48, Kind.FATAL),
    (A.ADD_PARTITIONS, 90, Kind.FATAL),
    (A.ADD_OFFSETS, 7, Kind.RETRY),
    (A.ADD_OFFSETS, 30, Kind.ABORTABLE),
    (A.ADD_OFFSETS, 43, Kind.FATAL),
    (A.END_TXN, 51, Kind.RETRY),
    (A.END_TXN, 15, Kind.REFIND),
    (A.END_TXN, 49, Kind.BUMP),
    (A.END_TXN, 48, Kind.FATAL),
    (A.END_TXN, 90, Kind.FATAL),
    (A.END_TXN, 42, Kind.ABORTABLE),
    (A.TXN_OFFSET_COMMIT, 22, Kind.ABORTABLE),
    (A.TXN_OFFSET_COMMIT, 25, Kind.ABORTABLE),
    (A.TXN_OFFSET_COMMIT, 82, Kind.ABORTABLE),
    (A.TXN_OFFSET_COMMIT, 49, Kind.FATAL),
    (A.TXN_OFFSET_COMMIT, 3, Kind.RETRY),
    (A.PRODUCE, 47, Kind.FATAL),
    (A.PRODUCE, 59, Kind.BUMP),
    (A.PRODUCE, 45, Kind.BUMP),
    (A.PRODUCE, 48, Kind.ABORTABLE),
    (A.PRODUCE, 6, Kind.RETRY),
    (A.PRODUCE, 10, Kind.ABORTABLE),
]


@pytest.mark.parametrize("api,code,kind", CLASSIFY)
def test_classify(api: TxnApi, code: int, kind: Kind) -> None:
    assert classify(api, code) is kind


TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def ready(can_bump: bool = True) -> TransactionManager:
    tm = TransactionManager("tx", can_bump=can_bump)
    tm.begin_init()
    tm.on_init_producer_id(7, 0)
    return tm


def test_happy_path_commit_then_abort() -> None:
    tm = ready()
    assert tm.state is TxnState.READY and (tm.producer_id, tm.producer_epoch) == (7, 0)
    tm.begin()
    assert tm.add_partition(TP0) is False and tm.pending == {TP0}
    tm.on_partitions_added({TP0})
    assert tm.add_partition(TP0) is True and tm.pending == set()
    assert tm.begin_commit() is True and tm.state is TxnState.COMMITTING
    tm.on_end_txn_done()
    assert tm.state is TxnState.READY and tm.partitions == set()
    tm.begin()
    tm.on_partitions_added({TP1})
    assert tm.begin_abort() is True
    tm.on_end_txn_done()
    assert tm.state is TxnState.READY


def test_empty_transaction_sends_no_end_txn() -> None:
    tm = ready()
    tm.begin()
    assert tm.begin_commit() is False and tm.state is TxnState.READY
    tm.begin()
    assert tm.begin_abort() is False and tm.state is TxnState.READY


# (steps, expected exception) for calls the state does not allow.
ILLEGAL = [
    (["begin"], IllegalStateError),                      # before init_transactions
    (["init", "init"], IllegalStateError),
    (["init", "commit"], IllegalStateError),             # no transaction open
    (["init", "abort"], IllegalStateError),
    (["init", "begin", "begin"], IllegalStateError),
]


@pytest.mark.parametrize("steps,exc", ILLEGAL)
def test_illegal_calls(steps: list[str], exc: type[Exception]) -> None:
    tm = TransactionManager("tx")
    actions = {"init": lambda: (tm.begin_init(), tm.on_init_producer_id(1, 0)),
               "begin": tm.begin, "commit": tm.begin_commit, "abort": tm.begin_abort}
    with pytest.raises(exc):
        for step in steps:
            actions[step]()


def test_abortable_error_blocks_commit_until_abort() -> None:
    tm = ready()
    tm.begin()
    tm.on_partitions_added({TP0})
    assert tm.on_error(A.ADD_PARTITIONS, error_for_code(29)) is Kind.ABORTABLE
    assert tm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(AbortableTransactionError) as info:
        tm.begin_commit()
    assert info.value.abortable and info.value.code == 29
    with pytest.raises(AbortableTransactionError):
        tm.begin()
    assert tm.begin_abort() is True
    tm.on_end_txn_done()
    assert tm.state is TxnState.READY and tm.error is None


def test_bump_error_aborts_with_init_producer_id() -> None:
    tm = ready(can_bump=True)
    tm.begin()
    tm.on_partitions_added({TP0})
    assert tm.on_error(A.PRODUCE, error_for_code(59)) is Kind.BUMP
    assert tm.begin_abort() is False and tm.abort_needs_init
    assert tm.init_request_ids() == (7, 0)
    tm.begin_init()
    tm.on_init_producer_id(7, 1)
    assert tm.state is TxnState.READY and tm.producer_epoch == 1 and not tm.needs_bump


def test_bump_error_is_fatal_without_kip_360() -> None:
    tm = ready(can_bump=False)
    tm.begin()
    assert tm.on_error(A.END_TXN, error_for_code(49)) is Kind.FATAL
    assert tm.state is TxnState.FATAL_ERROR


@pytest.mark.parametrize("api,code", [(A.INIT_PRODUCER_ID, 90), (A.END_TXN, 47),
                                      (A.ADD_PARTITIONS, 53), (A.PRODUCE, 47)])
def test_fatal_errors_are_final(api: TxnApi, code: int) -> None:
    tm = ready()
    tm.begin()
    assert tm.on_error(api, error_for_code(code)) is Kind.FATAL
    for call in (tm.begin, tm.begin_commit, tm.begin_abort):
        with pytest.raises(FatalTransactionError) as info:
            call()
        assert info.value.fatal and info.value.code == code


@pytest.mark.parametrize("api,code", [(A.ADD_PARTITIONS, 51), (A.END_TXN, 16),
                                      (A.TXN_OFFSET_COMMIT, 14)])
def test_retriable_errors_keep_the_state(api: TxnApi, code: int) -> None:
    tm = ready()
    tm.begin()
    assert tm.on_error(api, error_for_code(code)) in (Kind.RETRY, Kind.REFIND)
    assert tm.state is TxnState.IN_TRANSACTION and tm.error is None


def test_transition_table_is_closed() -> None:
    for target, sources in VALID_SOURCES.items():
        assert target is TxnState.UNINITIALIZED or sources, target
        assert sources <= set(TxnState)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="transactional_id"):
        TransactionManager("")
    with pytest.raises(ValueError, match="transaction_timeout_ms"):
        TransactionManager("x", transaction_timeout_ms=0)


@pytest.mark.parametrize("codes,worst", [
    ([0, 0], 0),
    ([0, 51], 51),
    ([55, 3, 55], 3),
    ([55, 55], 55),
    ([51, 29, 90], 90),
    ([49, 29], 49),
])
def test_worst_error_of_partitions(codes: list[int], worst: int) -> None:
    assert worst_error(A.ADD_PARTITIONS, codes) == worst


def test_offsets_alone_need_end_txn() -> None:
    tm = ready()
    tm.begin()
    tm.on_offsets_added()
    assert tm.begin_commit() is True
    assert tm.begin_commit() is True  # a retry after a timed-out EndTxn stays Committing
    tm.on_end_txn_done()
    assert not tm.offsets_added and tm.state is TxnState.READY
