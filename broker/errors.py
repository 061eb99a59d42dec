"""Map exceptions from the layers below to Kafka error codes."""

from __future__ import annotations

import structlog

from raftka.broker.acl_checks import AuthorizationError
from raftka.broker.replication.partition import PartitionError
from raftka.broker.replication.replica_manager import UnknownTopicOrPartition
from raftka.client.protocol import ErrorCode
from raftka.log.errors import (
    CorruptRecord,
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordTooLarge,
    TransactionCoordinatorFenced,
    UnsupportedCompression,
)
from raftka.raft_meta.controller.controller_errors import ControllerError

log = structlog.get_logger("broker.errors")

_BY_TYPE: tuple[tuple[type[BaseException], int], ...] = (
    (RecordTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (UnsupportedCompression, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (OutOfOrderSequence, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpoch, ErrorCode.INVALID_PRODUCER_EPOCH),
    (InvalidTxnState, ErrorCode.INVALID_TXN_STATE),
    (TransactionCoordinatorFenced, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (CorruptRecord, ErrorCode.CORRUPT_MESSAGE),
    (InvalidRecord, ErrorCode.INVALID_RECORD),
    (OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
    (UnknownTopicOrPartition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
)


def error_code_for(exc: BaseException) -> int:
    """The Kafka error code for an exception a handler caught (UNKNOWN_SERVER_ERROR if unexpected)."""
    if isinstance(exc, PartitionError):
        return exc.code
    if isinstance(exc, ControllerError):
        return exc.code
    if isinstance(exc, AuthorizationError):
        return exc.code
    for kind, code in _BY_TYPE:
        if isinstance(exc, kind):
            return int(code)
    log.error("handler.unexpected_error", error=repr(exc), exc_info=exc)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
