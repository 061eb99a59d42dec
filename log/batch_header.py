"""The 61-byte RecordBatch v2 header, read without touching the records.

This is the broker's hot path: validate length, magic and CRC, read the
producer fields and offsets, rewrite `baseOffset` and `partitionLeaderEpoch`
(both outside the CRC) in place. Layout (big-endian):

    0  baseOffset i64        8  batchLength i32       12 partitionLeaderEpoch i32
    16 magic i8              17 crc u32               21 attributes i16
    23 lastOffsetDelta i32   27 baseTimestamp i64     35 maxTimestamp i64
    43 producerId i64        51 producerEpoch i16     53 baseSequence i32
    57 recordCount i32       61 records...

`batchLength` counts the bytes after itself, so a batch occupies
`batchLength + 12` bytes. The CRC-32C covers bytes 21 .. end.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from raftka.log.errors import CorruptRecord, InvalidRecord

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_V2 = 2
CRC_START = 21

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40  # baseTimestamp holds the cleaner's delete horizon (KIP-534)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fields of one batch header; `position` is where the batch starts in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Total bytes the batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (wrapping at 2**31), or -1."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def peek_batch_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The total size of the batch at `pos`, or None if fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    _base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return length + LOG_OVERHEAD


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch at `pos` (no CRC check).

    Raises CorruptRecord if the bytes are too short for a header or for the
    length the header declares, InvalidRecord if the magic is not 2.
    """
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptRecord(f"batch header at position {pos} truncated: {available} bytes, need {HEADER_SIZE}")
    fields = _HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields, position=pos)
    if header.magic != MAGIC_V2:
        raise InvalidRecord(f"record batch magic {header.magic} at position {pos}, expected {MAGIC_V2}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecord(
            f"batch length {header.batch_length} at position {pos} is below the minimum {HEADER_SIZE - LOG_OVERHEAD}"
        )
    if header.size > available:
        raise CorruptRecord(
            f"batch at position {pos} declares {header.size} bytes but only {available} remain"
        )
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecord(
            f"batch at position {pos}: record count {header.record_count}, last offset delta {header.last_offset_delta}"
        )
    return header


def compute_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    start = header.position + CRC_START
    end = header.position + header.size
    return crc32c(memoryview(buf)[start:end])


def verify_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """Raise CorruptRecord if the stored CRC does not match the batch bytes."""
    actual = compute_crc(buf, header)
    if actual != header.crc:
        raise CorruptRecord(
            f"batch at offset {header.base_offset} (position {header.position}): "
            f"CRC-32C {actual:#010x} does not match stored {header.crc:#010x}"
        )


def iter_headers(buf: bytes | bytearray | memoryview, verify: bool = True):
    """Yield the header of every batch in `buf`, which must hold whole batches only."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_header(buf, pos)
        if verify:
            verify_crc(buf, header)
        yield header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC)."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _I32.pack_into(buf, pos + 12, epoch)


def set_max_timestamp_and_crc(buf: bytearray | memoryview, pos: int, max_timestamp: int) -> None:
    """For LogAppendTime: rewrite maxTimestamp (inside the CRC) and recompute the CRC."""
    _I64.pack_into(buf, pos + 35, max_timestamp)
    header = parse_header(buf, pos)
    _U32.pack_into(buf, pos + 17, compute_crc(buf, header))


def pack_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for `header`'s fields (its `position` is ignored).

    The CRC is written as given; call `update_crc` once the records follow it.
    """
    return _HEADER.pack(
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    )


def update_crc(buf: bytearray | memoryview, pos: int = 0) -> int:
    """Recompute the CRC-32C of the batch at `pos` from its bytes, store it and return it."""
    header = parse_header(buf, pos)
    crc = compute_crc(buf, header)
    _U32.pack_into(buf, pos + 17, crc)
    return crc
