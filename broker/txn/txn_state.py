"""Transactional ids as a pure state machine (Kafka's TransactionCoordinator rules, KIP-98/360).

Each function takes the current `TxnMetadata` of one transactional id (None if
unknown), the request and the time, and returns a `Decision`: the error to
answer, or the metadata to write to `__transaction_state` first (the answer is
owed once that record is durable), and whether markers must then be sent. It
never reads a clock, never allocates ids and does no I/O: the coordinator shell
(broker/txn/txn_coordinator.py) supplies `now_ms` and fresh producer ids, performs
the writes (marking the id `pending` meanwhile, so concurrent requests get
CONCURRENT_TRANSACTIONS), sends markers and writes the completion.

States (Kafka's names and ids, as stored in the log)::

    (unknown) --InitProducerId--> Empty --AddPartitions/AddOffsets--> Ongoing
    Ongoing --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers acked--> CompleteCommit
    Ongoing --EndTxn(abort) / fencing InitProducerId / timeout--> PrepareAbort --markers--> CompleteAbort
    Empty, CompleteX --InitProducerId--> Empty (epoch + 1; a new producer id once exhausted)
    Empty, CompleteX --AddPartitions--> Ongoing
    Empty, CompleteX --transactional.id.expiration.ms idle--> Dead (a tombstone)

Transaction version 2 (KIP-890 part 2; EndTxn v5, Produce v12, TxnOffsetCommit v5, which
set the transaction's `client_txn_version` to 2): every EndTxn bumps the producer epoch
in its PrepareCommit/PrepareAbort, the markers carry the new epoch, and the client gets
it in the answer. When that bump reaches the last epoch (Short.MaxValue), a fresh
producer id is allocated then (`next_producer_id`): the markers still go out under the
old id at Short.MaxValue and the CompleteX record moves to the new id at epoch 0, which
the client is told. Since the epoch tells transactions apart, a retried EndTxn is known
by its epoch (the current one minus one) and answered as the first, and an abort of a
transaction that added nothing (Empty, CompleteX) is a real PrepareAbort (Kafka's
table in TransactionCoordinator.endTransaction).

A PrepareCommit/PrepareAbort is *in transition* for as long as its markers are being
written (`in_transition`): Kafka holds the completion as the metadata's pending state from
the moment the markers are queued (prepareComplete, also on a load) until the CompleteX
record is written. So every request that checks Kafka's pendingTransitionInProgress gets
CONCURRENT_TRANSACTIONS then, and the client retries: at transaction version 2 an EndTxn at
the epoch the previous EndTxn answered (the client's next transaction, sent while the
previous markers are still out) is told to retry, not fenced, and AddPartitionsToTxn /
AddOffsetsToTxn / InitProducerId / EndTxn v5 check it before the producer id and epoch, as
Kafka 4.4 orders them.

Fencing an Ongoing transaction (a second producer's InitProducerId, or the
transaction timeout) bumps the epoch and aborts at the new epoch, so the ABORT
markers fence the old producer on every partition; the new producer is told
CONCURRENT_TRANSACTIONS and its retry bumps once more. Kafka's transient
PrepareEpochFence state collapses here into that one PrepareAbort write,
because the shell applies a decision without yielding in between.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from raftka.client.protocol import ErrorCode

NONE = int(ErrorCode.NONE)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
INVALID_PRODUCER_EPOCH = int(ErrorCode.INVALID_PRODUCER_EPOCH)
INVALID_TXN_STATE = int(ErrorCode.INVALID_TXN_STATE)
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
INVALID_TRANSACTION_TIMEOUT = int(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
CONCURRENT_TRANSACTIONS = int(ErrorCode.CONCURRENT_TRANSACTIONS)
PRODUCER_FENCED = int(ErrorCode.PRODUCER_FENCED)
TRANSACTION_ABORTABLE = int(ErrorCode.TRANSACTION_ABORTABLE)

TV_1 = 0  # Kafka's TV_0/TV_1 client: no epoch bump per transaction
TV_2 = 2  # KIP-890 part 2: EndTxn v5+, Produce v12+, TxnOffsetCommit v5+

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with the ids stored in `__transaction_state`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions/ListTransactions show (Kafka's stateName)."""
        return _DISPLAY[self]


_DISPLAY = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _DISPLAY.items()}

COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: one bump must stay possible for fencing."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1  # when the current transaction began (its first AddPartitions)
    update_ms: int = -1
    # KIP-360: the id/epoch before the last bump, so a retried InitProducerId gets the same answer.
    # Not stored in the v0 record (as in Kafka): lost on a coordinator move.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # The state a write in flight moves to; requests meanwhile get CONCURRENT_TRANSACTIONS.
    pending: TxnState | None = None
    # Transaction version 2: the id the CompleteX record moves to when the epoch overflowed
    # (-1: none), and the transaction version of the client's last request (0 or 2).
    next_producer_id: int = NO_PRODUCER_ID
    client_txn_version: int = TV_1

    def to(self, state: TxnState, now_ms: int, **changes: Any) -> TxnMetadata:
        after = dataclasses.replace(self, state=state, update_ms=now_ms, pending=None, **changes)
        _check_invariants(self, after)
        return after


# Kafka's TransactionState.validPreviousStates: the only transitions a write may make.
VALID_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, *COMPLETED},
    TxnState.ONGOING: {TxnState.ONGOING, *COMPLETED},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, *COMPLETED},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: set(COMPLETED),
    TxnState.PREPARE_EPOCH_FENCE: {TxnState.ONGOING},
}


def _check_invariants(before: TxnMetadata, after: TxnMetadata) -> None:
    """Self-checks of every transition (AssertionError names the broken one): along Kafka's
    table, the epoch never goes back under one producer id nor past Short.MaxValue, and
    only an open or deciding transaction holds partitions."""
    if before.state not in VALID_PREVIOUS[after.state]:
        raise AssertionError(f"{after.transactional_id!r}: {before.state.display_name} -> "
                             f"{after.state.display_name} is not a transition of Kafka's TransactionState")
    if after.producer_id == before.producer_id and after.producer_epoch < before.producer_epoch:
        raise AssertionError(f"{after.transactional_id!r}: producer {after.producer_id}'s epoch went back from "
                             f"{before.producer_epoch} to {after.producer_epoch}")
    if after.producer_epoch > MAX_EPOCH:
        raise AssertionError(f"{after.transactional_id!r}: producer epoch {after.producer_epoch} > {MAX_EPOCH}")
    if after.partitions and after.state not in (TxnState.ONGOING, *PREPARED):
        raise AssertionError(f"{after.transactional_id!r}: {after.state.display_name} holds partitions "
                             f"{sorted(after.partitions)}")


@dataclass(frozen=True)
class Decision:
    """What a request leads to: answer `error` now (`write` None), or write `write` and answer
    once it is durable. `send_markers`: after the write, send the markers of `write` (a
    PrepareCommit/PrepareAbort). `retry_error`: the answer owed after a successful write
    when it is not NONE (a fencing InitProducerId is told CONCURRENT_TRANSACTIONS)."""

    error: int = NONE
    write: TxnMetadata | None = None
    send_markers: bool = False
    retry_error: int = NONE

    @property
    def answer(self) -> int:
        return self.retry_error if self.write is not None else self.error


class NeedProducerId(Exception):
    """The decision needs a fresh producer id: call again with `new_producer_id`."""


def validate_timeout(timeout_ms: int, max_timeout_ms: int) -> int:
    return NONE if 0 < timeout_ms <= max_timeout_ms else INVALID_TRANSACTION_TIMEOUT


def in_transition(meta: TxnMetadata) -> bool:
    """Kafka's pendingTransitionInProgress: a write in flight, or a PrepareCommit/PrepareAbort
    whose markers are being written (Kafka's pending CompleteX until that record is written)."""
    return meta.pending is not None or meta.state in PREPARED


def init_producer_id(meta: TxnMetadata | None, transactional_id: str, timeout_ms: int, *,
                     expected_pid: int = NO_PRODUCER_ID, expected_epoch: int = NO_PRODUCER_EPOCH,
                     max_timeout_ms: int, now_ms: int, new_producer_id: int | None = None) -> Decision:
    """InitProducerId with a transactional id (v3+ may carry the producer's current id/epoch).
    Raises NeedProducerId when a fresh id is needed and `new_producer_id` is None."""
    if not transactional_id:
        return Decision(INVALID_REQUEST)
    if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
        return Decision(INVALID_REQUEST)
    code = validate_timeout(timeout_ms, max_timeout_ms)
    if code:
        return Decision(code)
    expected = None if expected_pid == NO_PRODUCER_ID else (expected_pid, expected_epoch)
    if meta is None:
        if new_producer_id is None:
            raise NeedProducerId
        meta = TxnMetadata(transactional_id, new_producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                           TxnState.EMPTY, update_ms=now_ms)
    if in_transition(meta):
        return Decision(CONCURRENT_TRANSACTIONS)
    if expected is not None and not _valid_expected_pid(meta, *expected):
        return Decision(PRODUCER_FENCED)
    if meta.state is TxnState.ONGOING:
        return Decision(write=_fence_and_abort(meta, now_ms), send_markers=True,
                        retry_error=CONCURRENT_TRANSACTIONS)
    if meta.state not in COMPLETED:  # Dead, PrepareEpochFence: never seen here
        return Decision(CONCURRENT_TRANSACTIONS)
    if epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
        if new_producer_id is None:
            raise NeedProducerId
        return Decision(write=meta.to(
            TxnState.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0, timeout_ms=timeout_ms,
            last_producer_id=meta.producer_id,
            last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
            partitions=frozenset(), start_ms=-1))
    bumped = meta.producer_epoch + 1
    if expected is None:
        epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
    elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
        epoch, last_epoch = bumped, meta.producer_epoch
    elif expected[1] == meta.last_producer_epoch:  # a retry of the bump this producer never heard of
        epoch, last_epoch = meta.producer_epoch, meta.last_producer_epoch
    else:
        return Decision(PRODUCER_FENCED)
    return Decision(write=meta.to(TxnState.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last_epoch,
                                  timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1))


def _valid_expected_pid(meta: TxnMetadata, pid: int, epoch: int) -> bool:
    """Kafka's isValidProducerId: the metadata was just created, the id is the current one, or
    it is the previous one and its epoch was exhausted (a retry after a rotation)."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
            or (pid == meta.last_producer_id and epoch_exhausted(epoch)))


def _fence_and_abort(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Kafka's prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient=false)."""
    epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
    return meta.to(TxnState.PREPARE_ABORT, now_ms, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)


def _check_producer(meta: TxnMetadata | None, transactional_id: str, pid: int, epoch: int) -> int:
    """Kafka 4.4's handleAddPartitionsToTransaction: a transition in progress first, then
    the producer id, then the epoch."""
    if not transactional_id:
        return INVALID_REQUEST
    if meta is None:
        return INVALID_PRODUCER_ID_MAPPING
    if in_transition(meta):
        return CONCURRENT_TRANSACTIONS
    if meta.producer_id != pid:
        return INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return PRODUCER_FENCED
    return NONE


def add_partitions(meta: TxnMetadata | None, transactional_id: str, pid: int, epoch: int,
                   partitions: frozenset[tuple[str, int]], now_ms: int, client_txn_version: int = TV_1) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets` partition;
    at transaction version 2 the partition leader's or group coordinator's implicit add)."""
    code = _check_producer(meta, transactional_id, pid, epoch)
    if code:
        return Decision(code)
    assert meta is not None
    if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
        return Decision(NONE)
    if meta.state not in (TxnState.ONGOING, *COMPLETED):
        return Decision(CONCURRENT_TRANSACTIONS)
    start = meta.start_ms if meta.state is TxnState.ONGOING else now_ms
    return Decision(write=meta.to(TxnState.ONGOING, now_ms, partitions=meta.partitions | partitions,
                                  start_ms=start, client_txn_version=client_txn_version))


def verify_partitions(meta: TxnMetadata | None, transactional_id: str, pid: int, epoch: int,
                      partitions: frozenset[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
    """AddPartitionsToTxn v4 `verify_only` (KIP-890 part 1, asked by partition leaders): a
    top-level error for the transaction, else per partition NONE if it is in the ongoing
    transaction and TRANSACTION_ABORTABLE if not (Kafka's answers). Never writes."""
    if not transactional_id:
        return INVALID_REQUEST, {}
    if meta is None or meta.producer_id != pid:
        return INVALID_PRODUCER_ID_MAPPING, {}
    if meta.producer_epoch != epoch:
        return PRODUCER_FENCED, {}
    if meta.state in PREPARED:
        return CONCURRENT_TRANSACTIONS, {}
    return NONE, {tp: NONE if tp in meta.partitions else TRANSACTION_ABORTABLE for tp in partitions}


def end_txn(meta: TxnMetadata | None, transactional_id: str, pid: int, epoch: int, commit: bool,
            now_ms: int, client_txn_version: int = TV_1, new_producer_id: int | None = None) -> Decision:
    """EndTxn from the client: Ongoing -> PrepareCommit/PrepareAbort (markers follow the write);
    a retry after the outcome is decided answers as Kafka does. `client_txn_version` 2 (EndTxn
    v5+) is KIP-890 part 2 (end_txn_v2); it may raise NeedProducerId."""
    if client_txn_version >= TV_2:
        return end_txn_v2(meta, transactional_id, pid, epoch, commit, now_ms, new_producer_id)
    if not transactional_id:
        return Decision(INVALID_REQUEST)
    if meta is None or meta.producer_id != pid:
        return Decision(INVALID_PRODUCER_ID_MAPPING)
    if meta.producer_epoch != epoch:
        return Decision(PRODUCER_FENCED)
    if in_transition(meta):
        return Decision(CONCURRENT_TRANSACTIONS)
    state = meta.state
    if state is TxnState.ONGOING:
        return Decision(write=meta.to(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms),
                        send_markers=True)
    if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return Decision(NONE)
    return Decision(INVALID_TXN_STATE)


def end_txn_v2(meta: TxnMetadata | None, transactional_id: str, pid: int, epoch: int, commit: bool,
               now_ms: int, new_producer_id: int | None = None) -> Decision:
    """EndTxn v5+ (Kafka's endTransaction at transaction version 2). Every decision bumps the
    epoch; a retry is the request one epoch behind (or, across an overflow, the old id at
    Short.MaxValue - 1 while the new id is at 0), answered NONE with the current id/epoch.
    While a transition is in progress (a write, or the markers of a PrepareCommit/PrepareAbort)
    every EndTxn is told CONCURRENT_TRANSACTIONS before its id and epoch are looked at (Kafka
    4.4's order), so the next transaction's abort or commit, at the epoch the last EndTxn
    answered, waits for the markers instead of being fenced. Then:

    | state          | abort: retry | abort: current | commit: retry | commit: current |
    | Empty          | fenced       | PrepareAbort   | fenced        | INVALID_TXN_STATE |
    | CompleteAbort  | NONE         | PrepareAbort   | INVALID_TXN_STATE | INVALID_TXN_STATE |
    | CompleteCommit | INVALID_TXN_STATE | PrepareAbort | NONE       | INVALID_TXN_STATE |
    """
    if not transactional_id:
        return Decision(INVALID_REQUEST)
    if meta is None:
        return Decision(INVALID_PRODUCER_ID_MAPPING)
    if in_transition(meta):
        return Decision(CONCURRENT_TRANSACTIONS)
    retry_on_overflow = (meta.last_producer_id == pid and epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)
    retry_on_bump = meta.producer_epoch == epoch + 1
    state = meta.state
    if state in (TxnState.ONGOING, TxnState.EMPTY):
        valid_epoch = epoch == meta.producer_epoch
    else:  # CompleteCommit, CompleteAbort (PrepareX is in transition)
        valid_epoch = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
    if meta.producer_id != pid and not retry_on_overflow:
        return Decision(INVALID_PRODUCER_ID_MAPPING)
    if not valid_epoch:
        return Decision(PRODUCER_FENCED)
    is_retry = retry_on_bump or retry_on_overflow
    target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state is TxnState.ONGOING:
        return _prepare_v2(meta, target, now_ms, new_producer_id, no_partition_added=False)
    if state is TxnState.EMPTY:
        return (Decision(INVALID_TXN_STATE) if commit
                else _prepare_v2(meta, target, now_ms, new_producer_id, no_partition_added=True))
    same = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if is_retry:
        return Decision(NONE if state is same else INVALID_TXN_STATE)
    if commit:
        return Decision(INVALID_TXN_STATE)
    return _prepare_v2(meta, target, now_ms, new_producer_id, no_partition_added=True)


def _prepare_v2(meta: TxnMetadata, target: TxnState, now_ms: int, new_producer_id: int | None, *,
                no_partition_added: bool) -> Decision:
    """Kafka's prepareAbortOrCommit at transaction version 2: epoch + 1 (a fresh producer id
    for the completion when that exhausts the epochs). An abort of nothing starts now."""
    if meta.producer_epoch >= MAX_EPOCH:  # fenced at the last epoch: only InitProducerId moves on
        return Decision(PRODUCER_FENCED)
    next_pid = NO_PRODUCER_ID
    if epoch_exhausted(meta.producer_epoch):
        if new_producer_id is None:
            raise NeedProducerId
        next_pid = new_producer_id
    return Decision(write=meta.to(target, now_ms, producer_epoch=meta.producer_epoch + 1,
                                  last_producer_epoch=meta.producer_epoch, next_producer_id=next_pid,
                                  start_ms=now_ms if no_partition_added else meta.start_ms,
                                  client_txn_version=TV_2),
                    send_markers=True)


def end_txn_answer(meta: TxnMetadata) -> tuple[int, int]:
    """The (producer id, epoch) EndTxn v5 answers after writing `meta` (a PrepareX): those of
    the completion, the new id at epoch 0 after an overflow."""
    if meta.next_producer_id != NO_PRODUCER_ID:
        return meta.next_producer_id, 0
    return meta.producer_id, meta.producer_epoch


def complete(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """The CompleteCommit/CompleteAbort record written once every marker of `meta` is acked
    (at transaction version 2 after an overflow, under the new producer id at epoch 0)."""
    state = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    if meta.client_txn_version >= TV_2 and meta.next_producer_id != NO_PRODUCER_ID:
        return meta.to(state, now_ms, partitions=frozenset(), producer_id=meta.next_producer_id, producer_epoch=0,
                       last_producer_id=meta.producer_id, next_producer_id=NO_PRODUCER_ID)
    return meta.to(state, now_ms, partitions=frozenset(), next_producer_id=NO_PRODUCER_ID)


def timed_out(meta: TxnMetadata, now_ms: int) -> Decision | None:
    """The coordinator's abort of an expired transaction (start + timeout passed): fence the
    producer with a bumped epoch and abort. None if `meta` is not due."""
    if meta.state is not TxnState.ONGOING or meta.pending is not None:
        return None
    if meta.start_ms + meta.timeout_ms >= now_ms:
        return None
    return Decision(write=_fence_and_abort(meta, now_ms), send_markers=True)


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """`transactional.id.expiration.ms` idle in Empty/CompleteX: remove the id (a tombstone)."""
    return meta.state in COMPLETED and meta.pending is None and meta.update_ms + expiration_ms <= now_ms


def from_log(transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
             partitions: frozenset[tuple[str, int]], update_ms: int, start_ms: int, *,
             previous_producer_id: int = NO_PRODUCER_ID, next_producer_id: int = NO_PRODUCER_ID,
             client_txn_version: int = TV_1) -> TxnMetadata:
    """The metadata a stored record describes (ValueError for an unknown status)."""
    try:
        state = TxnState(status)
    except ValueError:
        raise ValueError(f"transaction status {status} for {transactional_id!r}; expected 0..7") from None
    return TxnMetadata(transactional_id, producer_id, producer_epoch, timeout_ms, state, partitions,
                       start_ms, update_ms, last_producer_id=previous_producer_id,
                       next_producer_id=next_producer_id, client_txn_version=client_txn_version)
