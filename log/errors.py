"""Errors raised by the log layer. The broker maps each to a Kafka error code."""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error raised by `log/`."""


class CorruptRecord(LogError):
    """A batch failed validation: bad CRC, bad length, truncated bytes (Kafka: CORRUPT_MESSAGE, 2)."""


class InvalidRecord(LogError):
    """A batch is well-formed but not acceptable: wrong magic, bad counts (Kafka: INVALID_RECORD, 87)."""


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
