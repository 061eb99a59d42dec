"""Transaction markers: the control batches that end a transaction in a partition.

A marker is a RecordBatch v2 with attributes `0x30` (bit 4 transactional, bit 5
control), uncompressed, the transaction's producer id and the marker's epoch,
`baseSequence` -1 and exactly one record:

    key   = version i16 (0) | type i16 (0 ABORT, 1 COMMIT; 2-6 are KRaft's)
    value = version i16 (0) | coordinator_epoch i32

78 bytes in all (`batchLength` 66), as Kafka's EndTransactionMarker writes it.
aiokafka recognises ABORT only by the exact key bytes `00 00 00 00`, so the
key version stays 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from raftka.log.batch_header import BatchHeader
from raftka.log.errors import CorruptRecord
from raftka.log.record_batch import Record, decode_batch, encode_batch

ABORT = 0
COMMIT = 1
MARKER_TYPES = {ABORT: "ABORT", COMMIT: "COMMIT"}

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The one record of a control batch: its type and, for markers, the coordinator epoch."""

    type: int
    coordinator_epoch: int = -1

    @property
    def is_marker(self) -> bool:
        return self.type in MARKER_TYPES

    @property
    def name(self) -> str:
        return MARKER_TYPES.get(self.type, f"CONTROL({self.type})")


def encode_marker(*, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                  timestamp_ms: int, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """The bytes of one COMMIT/ABORT marker batch (CRC included)."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)
    return encode_batch([Record(key, value, timestamp=timestamp_ms)], base_offset=base_offset,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                        partition_leader_epoch=partition_leader_epoch, transactional=True, control=True,
                        base_timestamp=timestamp_ms)


def parse_control_key(key: bytes | None) -> int:
    """The control type of a control record key; raises CorruptRecord if it is not one."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecord(f"control record key {key!r}: expected at least {_KEY.size} bytes "
                            "(version i16, type i16)")
    _version, kind = _KEY.unpack_from(key, 0)
    return kind


def parse_marker_value(value: bytes | None) -> int:
    """The coordinator epoch of a marker's value; raises CorruptRecord if it does not parse."""
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecord(f"transaction marker value {value!r}: expected at least {_VALUE.size} bytes "
                            "(version i16, coordinator_epoch i32)")
    return _VALUE.unpack_from(value, 0)[1]


def read_control_record(buf: bytes | bytearray | memoryview, header: BatchHeader) -> ControlRecord:
    """The control record of the control batch `header` (at `header.position` in `buf`).

    Raises CorruptRecord if the batch holds no record or one that is not a control record."""
    batch = decode_batch(buf, header.position, verify_crc=False)
    if not batch.records:
        raise CorruptRecord(f"control batch at offset {header.base_offset} holds no record")
    record = batch.records[0]
    kind = parse_control_key(record.key)
    if kind in MARKER_TYPES:
        return ControlRecord(kind, parse_marker_value(record.value))
    return ControlRecord(kind)
