"""The transactional producer's state machine (pure: no I/O, no clock).

Kafka's design (KIP-98, KIP-360, KIP-447), modelled on the Java producer's
TransactionManager and librdkafka's rdkafka_txnmgr.c::

    UNINITIALIZED --init--> INITIALIZING --pid--> READY --begin--> IN_TRANSACTION
         IN_TRANSACTION --commit--> COMMITTING --EndTxn ok--> READY
         IN_TRANSACTION --abort---> ABORTING ---EndTxn ok--> READY
         IN_TRANSACTION / COMMITTING / INITIALIZING --abortable error--> ABORTABLE_ERROR
         ABORTABLE_ERROR --abort--> ABORTING (--> INITIALIZING when the epoch must be bumped)
         any --fatal error--> FATAL_ERROR (final: the producer must be closed)

`classify(api, code)` sorts a broker error into retriable / abortable /
abortable-with-epoch-bump / fatal exactly as librdkafka does per API (the table
in docs/architecture.md, "Transactions: the client side"). The trio shell in
producer.py sends the requests and feeds the answers here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from raftka.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    KafkaError,
    error_for_code,
)
from raftka.client.protocol import ErrorCode
from raftka.client.records import TopicPartition


class TxnState(Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "Committing"
    ABORTING = "Aborting"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


S = TxnState
# target state -> the states it may be entered from (Java's TransactionManager.isTransitionValid).
VALID_SOURCES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING: frozenset({S.IN_TRANSACTION}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR,
                                  S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(TxnState),
}


class Kind(Enum):
    """What the client does after a broker error."""

    RETRY = "retry"  # send again after the backoff (to the same coordinator)
    REFIND = "refind"  # find the coordinator again, then send again
    ABORTABLE = "abortable"  # the transaction must be aborted; the producer lives on
    BUMP = "abortable+bump"  # abortable, and the abort must bump the epoch (KIP-360)
    FATAL = "fatal"  # the producer is unusable: close it


class TxnApi(Enum):
    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS = "AddPartitionsToTxn"
    ADD_OFFSETS = "AddOffsetsToTxn"
    END_TXN = "EndTxn"
    TXN_OFFSET_COMMIT = "TxnOffsetCommit"
    PRODUCE = "Produce"
    FIND_COORDINATOR = "FindCoordinator"


E = ErrorCode
_REFIND = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})
_FATAL_COMMON = frozenset({E.CLUSTER_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED})

# Per API: (retried codes, codes needing an epoch bump, fatal codes); every other code is
# abortable. From librdkafka's response handlers (docs/transactions.md, "What the clients do").
_TABLE: dict[TxnApi, tuple[frozenset, frozenset, frozenset]] = {
    TxnApi.ADD_PARTITIONS: (
        frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_LOAD_IN_PROGRESS,
                   E.CONCURRENT_TRANSACTIONS}),
        frozenset({E.INVALID_PRODUCER_ID_MAPPING, E.UNKNOWN_PRODUCER_ID}),
        _FATAL_COMMON | {E.INVALID_TXN_STATE}),
    TxnApi.ADD_OFFSETS: (
        frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT,
                   E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}),
        frozenset(),
        _FATAL_COMMON | {E.INVALID_TXN_STATE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT}),
    TxnApi.END_TXN: (
        frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}),
        frozenset({E.INVALID_PRODUCER_ID_MAPPING, E.UNKNOWN_PRODUCER_ID}),
        _FATAL_COMMON | {E.INVALID_TXN_STATE}),
    TxnApi.TXN_OFFSET_COMMIT: (
        frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT,
                   E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}),
        frozenset(),
        _FATAL_COMMON | {E.INVALID_TXN_STATE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         E.INVALID_PRODUCER_ID_MAPPING}),
    TxnApi.PRODUCE: (
        frozenset(),  # the retriable ones are retried as for any idempotent batch
        frozenset({E.UNKNOWN_PRODUCER_ID, E.OUT_OF_ORDER_SEQUENCE_NUMBER}),
        frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED,
                   E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED})),
}
_INIT_FATAL = frozenset({E.CLUSTER_AUTHORIZATION_FAILED, E.INVALID_PRODUCER_EPOCH,
                         E.INVALID_TRANSACTION_TIMEOUT, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         E.PRODUCER_FENCED, E.INVALID_REQUEST, E.UNSUPPORTED_VERSION})


_SEVERITY = (Kind.RETRY, Kind.REFIND, Kind.ABORTABLE, Kind.BUMP, Kind.FATAL)


def worst_error(api: TxnApi, codes: list[int]) -> int:
    """Of several per-partition error codes in one answer, the one that decides its fate
    (0 when all are 0). OPERATION_NOT_ATTEMPTED only echoes another partition's failure."""
    failed = [c for c in codes if c and c != ErrorCode.OPERATION_NOT_ATTEMPTED] \
        or [c for c in codes if c]
    if not failed:
        return 0
    return max(failed, key=lambda c: _SEVERITY.index(classify(api, c)))


def classify(api: TxnApi, code: int) -> Kind:
    """What to do about error `code` (non-zero) in a response to `api`."""
    code = int(code)
    if code in _REFIND:
        return Kind.REFIND
    if api is TxnApi.FIND_COORDINATOR:
        return Kind.FATAL if code in _FATAL_COMMON else Kind.RETRY
    if api is TxnApi.INIT_PRODUCER_ID:
        return Kind.FATAL if code in _INIT_FATAL else Kind.RETRY
    retried, bump, fatal = _TABLE[api]
    if code in fatal:
        return Kind.FATAL
    if code in retried:
        return Kind.RETRY
    if code in bump:
        return Kind.BUMP
    if api is TxnApi.PRODUCE and error_for_code(code).retriable:
        return Kind.RETRY
    return Kind.ABORTABLE


@dataclass
class TransactionManager:
    """One transactional producer's transaction state. Methods raise
    IllegalStateError for a call the current state does not allow, and the
    stored error once the state is AbortableError/FatalError."""

    transactional_id: str
    transaction_timeout_ms: int = 60000
    state: TxnState = TxnState.UNINITIALIZED
    producer_id: int = -1
    producer_epoch: int = -1
    # Partitions the coordinator has added to the current transaction, and those still to add.
    partitions: set[TopicPartition] = field(default_factory=set)
    pending: set[TopicPartition] = field(default_factory=set)
    offsets_added: bool = False  # AddOffsetsToTxn succeeded in this transaction
    error: KafkaError | None = None
    needs_bump: bool = False
    # Whether the broker's InitProducerId is v3+ (KIP-360: an abort can bump the epoch).
    can_bump: bool = False

    def __post_init__(self) -> None:
        if not self.transactional_id:
            raise ValueError("transactional_id is empty; expected a non-empty string")
        if self.transaction_timeout_ms <= 0:
            raise ValueError("transaction_timeout_ms must be > 0, got "
                             f"{self.transaction_timeout_ms}")

    # --- transitions --------------------------------------------------------------
    def _to(self, target: TxnState) -> None:
        if self.state not in VALID_SOURCES[target]:
            if self.state is TxnState.FATAL_ERROR or self.state is TxnState.ABORTABLE_ERROR:
                assert self.error is not None
                raise self.error
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: cannot go from "
                f"{self.state.value} to {target.value}")
        self.state = target

    def _check_not_failed(self) -> None:
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            assert self.error is not None
            raise self.error

    def begin_init(self) -> None:
        """init_transactions() was called: an InitProducerId follows."""
        self._to(TxnState.INITIALIZING)

    def init_request_ids(self) -> tuple[int, int]:
        """(producer_id, producer_epoch) for InitProducerId v3+: (-1, -1) for a first
        init, the current pair for a KIP-360 bump."""
        if self.needs_bump and self.producer_id >= 0:
            return self.producer_id, self.producer_epoch
        return -1, -1

    def on_init_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        if self.state is not TxnState.INITIALIZING:
            raise IllegalStateError(f"InitProducerId answered in state {self.state.value}")
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.needs_bump = False
        self._reset_txn()
        self._to(TxnState.READY)

    def begin(self) -> None:
        self._check_not_failed()
        if self.state is not TxnState.READY:
            raise IllegalStateError(
                f"begin_transaction needs state Ready (after init_transactions and the previous "
                f"commit/abort), not {self.state.value}")
        self._to(TxnState.IN_TRANSACTION)

    def require_in_transaction(self, what: str) -> None:
        self._check_not_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError(f"{what} needs an open transaction (begin_transaction), "
                                    f"state is {self.state.value}")

    def add_partition(self, tp: TopicPartition) -> bool:
        """A record for `tp` is ready to send: True if `tp` is already in the transaction
        (its batch may go), False if AddPartitionsToTxn must succeed first."""
        if tp in self.partitions:
            return True
        self.pending.add(tp)
        return False

    def on_partitions_added(self, added: set[TopicPartition]) -> None:
        self.partitions |= added
        self.pending -= added

    def on_offsets_added(self) -> None:
        self.offsets_added = True

    @property
    def has_content(self) -> bool:
        """Whether the coordinator knows of anything in this transaction (so EndTxn is owed)."""
        return bool(self.partitions) or self.offsets_added

    def begin_commit(self) -> bool:
        """commit_transaction(): True if an EndTxn must be sent (False for a transaction
        that added no partition or offsets: nothing to end, as every Kafka client does)."""
        self._check_not_failed()
        if self.state is TxnState.COMMITTING:
            return True  # a retry after a timed-out EndTxn
        self._to(TxnState.COMMITTING)
        if not self.has_content:
            self._to(TxnState.READY)
            return False
        return True

    def begin_abort(self) -> bool:
        """abort_transaction(): True if an EndTxn(abort) must be sent. After an error that
        needs an epoch bump the abort is an InitProducerId instead (see `abort_needs_init`)."""
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state is TxnState.ABORTING:
            return not self.needs_bump and self.has_content  # a retry after a timeout
        self._to(TxnState.ABORTING)
        self.error = None
        if self.needs_bump:
            return False
        if not self.has_content:
            self._to(TxnState.READY)
            return False
        return True

    @property
    def abort_needs_init(self) -> bool:
        """In Aborting with a pending KIP-360 bump: send InitProducerId(pid, epoch)."""
        return self.state is TxnState.ABORTING and self.needs_bump

    def on_end_txn_done(self) -> None:
        if self.state not in (TxnState.COMMITTING, TxnState.ABORTING):
            raise IllegalStateError(f"EndTxn answered in state {self.state.value}")
        self._reset_txn()
        self._to(TxnState.READY)

    def _reset_txn(self) -> None:
        self.partitions = set()
        self.pending = set()
        self.offsets_added = False

    # --- errors ---------------------------------------------------------------------
    def on_error(self, api: TxnApi, cause: KafkaError) -> Kind:
        """Record a broker error; returns its Kind. For ABORTABLE/BUMP/FATAL the state
        moves to AbortableError/FatalError and `self.error` is what the user sees."""
        kind = classify(api, cause.code) if cause.code is not None else Kind.REFIND
        if kind is Kind.BUMP and not self.can_bump:
            kind = Kind.FATAL  # librdkafka: no KIP-360 on the broker -> fatal
        if kind in (Kind.RETRY, Kind.REFIND):
            return kind
        self.fail(cause, fatal=kind is Kind.FATAL, bump=kind is Kind.BUMP, api=api)
        return kind

    def fail(self, cause: BaseException, *, fatal: bool, bump: bool = False,
             api: TxnApi | None = None) -> None:
        what = f"{api.value}: " if api is not None else ""
        if fatal:
            self.error = FatalTransactionError(
                f"transactional id {self.transactional_id!r}: {what}{cause}", cause=cause)
            self.state = TxnState.FATAL_ERROR
            return
        if self.state is TxnState.FATAL_ERROR:
            return
        if self.state in (TxnState.ABORTING, TxnState.READY, TxnState.UNINITIALIZED):
            # Nothing open to abort: a failure while aborting is the abort's own error.
            return
        self.needs_bump = self.needs_bump or bump
        self.error = AbortableTransactionError(
            f"transactional id {self.transactional_id!r}: {what}{cause}; abort the "
            f"transaction", cause=cause)
        self.state = TxnState.ABORTABLE_ERROR
