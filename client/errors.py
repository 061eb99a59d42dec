"""The SDK's typed exceptions, built from the protocol's error table.

Every Kafka error code has an exception class: a few are named here so callers
can catch them (`except NotLeaderOrFollowerError`), the rest are made on
demand by `error_for_code` (class name = Kafka's name in CamelCase + "Error").
Each carries `code`, `name` and `retriable` straight from
`client.protocol.errors`, so the SDK never keeps its own copy of the table.
`KafkaConnectionError` and `KafkaTimeoutError` are client-side conditions
without a broker code (code -1 is reserved for UNKNOWN_SERVER_ERROR, so they
use None).
"""

from __future__ import annotations

from raftka.client.protocol.errors import ERRORS, ErrorCode, error_info


class KafkaError(Exception):
    """Base of every SDK error. `code` is the Kafka error code (None for
    client-side conditions), `retriable` whether trying again may succeed."""

    code: int | None = None
    name: str = "KAFKA_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "", *, code: int | None = None,
                 retriable: bool | None = None) -> None:
        if code is not None:
            self.code = code
        if retriable is not None:
            self.retriable = retriable
        self.message = message
        super().__init__(self._text())

    def _text(self) -> str:
        prefix = f"[{self.code} {self.name}]" if self.code is not None else f"[{self.name}]"
        return f"{prefix} {self.message}" if self.message else prefix

    @property
    def invalid_metadata(self) -> bool:
        """True when the client should refresh metadata before retrying."""
        return self.code in REFRESH_METADATA_CODES


class KafkaConnectionError(KafkaError):
    """The TCP connection to a broker failed or closed; in-flight requests are lost."""

    name = "CONNECTION_ERROR"
    retriable = True


class KafkaTimeoutError(KafkaError):
    """A client-side deadline passed (request, delivery or metadata wait)."""

    name = "TIMEOUT"
    retriable = True


# No answer from a broker (the connection failed, or the request timed out): a consumer's poll
# and a share consumer's acknowledgements treat it as transient, as Kafka's clients do.
NO_ANSWER: tuple[type[KafkaError], ...] = (KafkaConnectionError, KafkaTimeoutError)


class IllegalStateError(KafkaError):
    """The SDK object was used in a state that does not allow it (e.g. after close)."""

    name = "ILLEGAL_STATE"


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that this client can speak."""

    name = "UNSUPPORTED_VERSION"
    code = int(ErrorCode.UNSUPPORTED_VERSION)


# Codes after which a client refreshes metadata and retries: the Java client's
# InvalidMetadataException subclasses.
REFRESH_METADATA_CODES = frozenset(
    int(c)
    for c in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    )
)

_CLASSES: dict[int, type[KafkaError]] = {int(ErrorCode.UNSUPPORTED_VERSION): UnsupportedVersionError}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.lower().split("_"))


def _class_for(code: int) -> type[KafkaError]:
    cls = _CLASSES.get(code)
    if cls is None:
        if code not in ERRORS:
            raise KeyError(f"Kafka error code {code} is not in the protocol's error table")
        info = error_info(code)
        class_name = _camel(info.name) + "Error"
        cls = type(
            class_name,
            (KafkaError,),
            {
                "code": info.code,
                "name": info.name,
                "retriable": info.retriable,
                "__doc__": info.description,
                "__module__": __name__,
            },
        )
        _CLASSES[code] = cls
    return cls


def error_class(code: int) -> type[KafkaError]:
    """The exception class for a Kafka error code (KeyError for a code the
    protocol's error table does not define)."""
    return _class_for(int(code))


def error_for_code(code: int, message: str = "") -> KafkaError:
    """An exception instance for a non-zero Kafka error code. An unknown code
    becomes a plain KafkaError carrying it (a newer broker may send codes
    this client does not know)."""
    try:
        cls = _class_for(int(code))
    except KeyError:
        return KafkaError(f"unknown Kafka error code {code}: {message}".rstrip(": "), code=code)
    return cls(message or cls.__doc__ or "")


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the typed error for `code`; do nothing for 0 (NONE)."""
    if code:
        raise error_for_code(code, message)


# The errors callers most often catch, importable by name.
UnknownServerError = error_class(ErrorCode.UNKNOWN_SERVER_ERROR)
OffsetOutOfRangeError = error_class(ErrorCode.OFFSET_OUT_OF_RANGE)
CorruptMessageError = error_class(ErrorCode.CORRUPT_MESSAGE)
UnknownTopicOrPartitionError = error_class(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
LeaderNotAvailableError = error_class(ErrorCode.LEADER_NOT_AVAILABLE)
NotLeaderOrFollowerError = error_class(ErrorCode.NOT_LEADER_OR_FOLLOWER)
RequestTimedOutError = error_class(ErrorCode.REQUEST_TIMED_OUT)
MessageTooLargeError = error_class(ErrorCode.MESSAGE_TOO_LARGE)
NotEnoughReplicasError = error_class(ErrorCode.NOT_ENOUGH_REPLICAS)
NotEnoughReplicasAfterAppendError = error_class(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
TopicAlreadyExistsError = error_class(ErrorCode.TOPIC_ALREADY_EXISTS)
InvalidPartitionsError = error_class(ErrorCode.INVALID_PARTITIONS)
InvalidReplicationFactorError = error_class(ErrorCode.INVALID_REPLICATION_FACTOR)
InvalidConfigError = error_class(ErrorCode.INVALID_CONFIG)
NotControllerError = error_class(ErrorCode.NOT_CONTROLLER)
InvalidRequestError = error_class(ErrorCode.INVALID_REQUEST)
OutOfOrderSequenceNumberError = error_class(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
DuplicateSequenceNumberError = error_class(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
InvalidProducerEpochError = error_class(ErrorCode.INVALID_PRODUCER_EPOCH)
UnknownProducerIdError = error_class(ErrorCode.UNKNOWN_PRODUCER_ID)
FencedLeaderEpochError = error_class(ErrorCode.FENCED_LEADER_EPOCH)
UnknownLeaderEpochError = error_class(ErrorCode.UNKNOWN_LEADER_EPOCH)
UnsupportedCompressionTypeError = error_class(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)

# Transactions (KIP-98): the broker errors a transactional producer's caller may catch.
ProducerFencedError = error_class(ErrorCode.PRODUCER_FENCED)
TransactionalIdAuthorizationFailedError = error_class(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
ConcurrentTransactionsError = error_class(ErrorCode.CONCURRENT_TRANSACTIONS)
CoordinatorLoadInProgressError = error_class(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
NotCoordinatorError = error_class(ErrorCode.NOT_COORDINATOR)
InvalidTxnStateError = error_class(ErrorCode.INVALID_TXN_STATE)


class TransactionError(KafkaError):
    """A transactional producer's failure. `cause` is the underlying error (a broker
    error carries its Kafka code, copied here); `abortable`/`fatal` say what the
    caller must do, as confluent-kafka's `txn_requires_abort()` / `fatal()`."""

    name = "TRANSACTION_ERROR"
    abortable = False
    fatal = False

    def __init__(self, message: str = "", *, cause: BaseException | None = None) -> None:
        self.cause = cause
        code = getattr(cause, "code", None)
        if isinstance(cause, KafkaError) and code is not None:
            self.name = cause.name
        super().__init__(message, code=code, retriable=False)


class AbortableTransactionError(TransactionError):
    """The current transaction cannot commit: call `abort_transaction()`, then start
    a new one. The producer stays usable."""

    abortable = True


class FatalTransactionError(TransactionError):
    """The producer can no longer be used (fenced by a newer instance with the same
    transactional id, not authorized, or an error Kafka deems fatal): close it."""

    fatal = True
