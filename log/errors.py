"""Errors raised by the log layer. The broker maps each to a Kafka error code."""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error raised by `log/`."""


class CorruptRecord(LogError):
    """A batch failed validation: bad CRC, bad length, truncated bytes (Kafka: CORRUPT_MESSAGE, 2)."""


class InvalidRecord(LogError):
    """A batch is not acceptable: wrong magic, bad counts, a malformed record (Kafka: INVALID_RECORD, 87).

    `record_index` is the index in its batch of the record at fault, if one is
    (Produce v8+ answers it in `record_errors`).
    """

    def __init__(self, message: str, *, record_index: int | None = None) -> None:
        super().__init__(message)
        self.record_index = record_index


class UncompressedTooLarge(CorruptRecord):
    """Compressed data would inflate past the caller's bound (a decompression bomb, or a huge batch)."""


class RecordTooLarge(LogError):
    """A batch is larger than `max.message.bytes` (Kafka: MESSAGE_TOO_LARGE, 10)."""


class UnsupportedCompression(LogError):
    """A codec id we do not know (Kafka: UNSUPPORTED_COMPRESSION_TYPE, 76)."""


class OffsetOutOfRange(LogError):
    """A read below the log-start or above the log-end offset (Kafka: OFFSET_OUT_OF_RANGE, 1)."""


class OutOfOrderSequence(LogError):
    """Idempotent producer: sequence gap (Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""


class InvalidProducerEpoch(LogError):
    """Idempotent producer: an epoch older than the one we know (Kafka: INVALID_PRODUCER_EPOCH, 47)."""


class InvalidTxnState(LogError):
    """A non-transactional batch from a producer with an open transaction in the partition,
    or a transactional write the coordinator did not add (Kafka: INVALID_TXN_STATE, 48)."""


class TransactionCoordinatorFenced(LogError):
    """A marker whose coordinator epoch is older than the last one seen (Kafka: 52)."""
