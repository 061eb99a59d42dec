"""The keys and values of `__transaction_state` records, in Kafka's TransactionLog format.

- TransactionLogKey v0: version i16=0, transactional_id string
- TransactionLogValue v0: version i16=0, producer_id i64, producer_epoch i16,
  transaction_timeout_ms i32, transaction_status i8, transaction_partitions
  (nullable array, -1 = null, of {topic string, partition_ids [i32]}, one entry per
  topic; null in Empty, empty in CompleteCommit/CompleteAbort),
  last_update_timestamp_ms i64, start_timestamp_ms i64

- TransactionLogValue v1 (Kafka 4.0+, written from `transaction.version` 1): the same
  fields, flexible (compact strings and arrays, tagged fields), with three tags: 0
  `previous_producer_id` i64, 1 `next_producer_id` i64 (both -1 by default), 2
  `client_transaction_version` i16 (0 by default). A tag at its default is not written.

A null value is a tombstone (the id expired). raftka writes v1 at transaction.version 2
(broker/features.py), as Kafka does from level 1. Strings are i16-length-prefixed UTF-8
(v0) or compact (v1). Decoding raises ValueError naming what was malformed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from raftka.broker.group.group_records import _Reader, _string, partition_for_group

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 1  # what raftka writes (Kafka's TransactionVersion.transactionLogValueVersion)
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TXN_VERSION = 0, 1, 2


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset[tuple[str, int]]
    update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_txn_version: int = 0


def partition_for_txn(transactional_id: str, num_partitions: int) -> int:
    """Kafka's choice: Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions
    (the same rule as for group ids)."""
    return partition_for_group(transactional_id, num_partitions)


def txn_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_txn_key(data: bytes) -> str:
    reader = _Reader(data, "__transaction_state key")
    version = reader.unpack(">h")
    if version != KEY_VERSION:
        raise ValueError(f"__transaction_state key version {version}; expected {KEY_VERSION}")
    tid = reader.string()
    if tid is None:
        raise ValueError("__transaction_state key has a null transactional id")
    return tid


def txn_value(value: TxnLogValue, *, partitions_null: bool, version: int = VALUE_VERSION) -> bytes:
    """`partitions_null`: write the array as null, as Kafka does for Empty. `version` 0 or 1."""
    if version == 1:
        return _txn_value_v1(value, partitions_null)
    if version != 0:
        raise ValueError(f"__transaction_state value version {version}; expected 0 or 1")
    out = [struct.pack(">hqhib", 0, value.producer_id, value.producer_epoch,
                       value.timeout_ms, value.status)]
    if partitions_null:
        out.append(struct.pack(">i", -1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(index)
        out.append(struct.pack(">i", len(by_topic)))
        for topic, indexes in by_topic.items():
            out.append(_string(topic))
            out.append(struct.pack(f">i{len(indexes)}i", len(indexes), *indexes))
    out.append(struct.pack(">qq", value.update_ms, value.start_ms))
    return b"".join(out)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(text: str) -> bytes:
    data = text.encode()
    return _varint_bytes(len(data) + 1) + data


def _txn_value_v1(value: TxnLogValue, partitions_null: bool) -> bytes:
    out = [struct.pack(">hqhib", 1, value.producer_id, value.producer_epoch, value.timeout_ms, value.status)]
    if partitions_null:
        out.append(_varint_bytes(0))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(index)
        out.append(_varint_bytes(len(by_topic) + 1))
        for topic, indexes in by_topic.items():
            out.append(_compact_string(topic))
            out.append(_varint_bytes(len(indexes) + 1) + struct.pack(f">{len(indexes)}i", *indexes))
            out.append(_varint_bytes(0))  # no tags in a topic entry
    out.append(struct.pack(">qq", value.update_ms, value.start_ms))
    tags = []
    if value.previous_producer_id != -1:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, struct.pack(">q", value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((_TAG_NEXT_PRODUCER_ID, struct.pack(">q", value.next_producer_id)))
    if value.client_txn_version != 0:
        tags.append((_TAG_CLIENT_TXN_VERSION, struct.pack(">h", value.client_txn_version)))
    out.append(_varint_bytes(len(tags)))
    for tag, data in tags:
        out.append(_varint_bytes(tag) + _varint_bytes(len(data)) + data)
    return b"".join(out)


def _unsigned_varint(reader: _Reader) -> int:
    shift = result = 0
    while True:
        byte = reader.unpack(">B")
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if shift > 28:
            raise ValueError(f"{reader.what}: unsigned varint longer than 5 bytes")


def decode_txn_value(data: bytes) -> TxnLogValue:
    reader = _Reader(data, "__transaction_state value")
    version = reader.unpack(">h")
    if version not in (0, 1):
        raise ValueError(f"__transaction_state value version {version}; expected 0 or 1")
    flexible = version >= 1
    pid, epoch, timeout, status = reader.unpack(">q"), reader.unpack(">h"), reader.unpack(">i"), reader.unpack(">b")
    partitions: set[tuple[str, int]] = set()
    count = _unsigned_varint(reader) - 1 if flexible else reader.unpack(">i")
    for _ in range(max(count, 0)):
        if flexible:
            n = _unsigned_varint(reader) - 1
            topic = reader._take(n).decode() if n >= 0 else ""
            indexes = [reader.unpack(">i") for _ in range(max(_unsigned_varint(reader) - 1, 0))]
            _skip_tags(reader)
        else:
            topic = reader.string() or ""
            n = reader.unpack(">i")
            if n < 0 or n * 4 > len(reader.data) - reader.pos:
                raise ValueError(f"__transaction_state value: {n} partition ids for topic {topic!r} "
                                 f"do not fit the remaining {len(reader.data) - reader.pos} bytes")
            indexes = [reader.unpack(">i") for _ in range(n)]
        partitions.update((topic, i) for i in indexes)
    update_ms, start_ms = reader.unpack(">q"), reader.unpack(">q")
    tags = _read_tags(reader) if flexible else {}
    previous = struct.unpack(">q", tags[_TAG_PREVIOUS_PRODUCER_ID])[0] if _TAG_PREVIOUS_PRODUCER_ID in tags else -1
    following = struct.unpack(">q", tags[_TAG_NEXT_PRODUCER_ID])[0] if _TAG_NEXT_PRODUCER_ID in tags else -1
    client_tv = struct.unpack(">h", tags[_TAG_CLIENT_TXN_VERSION])[0] if _TAG_CLIENT_TXN_VERSION in tags else 0
    return TxnLogValue(pid, epoch, timeout, status, frozenset(partitions), update_ms, start_ms,
                       previous, following, client_tv)


# Tag 3 is Kafka 4.4's NextProducerEpoch (i16, KIP-939's two-phase commit): read past, never written.
_TAG_SIZES = {_TAG_PREVIOUS_PRODUCER_ID: 8, _TAG_NEXT_PRODUCER_ID: 8, _TAG_CLIENT_TXN_VERSION: 2, 3: 2}


def _read_tags(reader: _Reader) -> dict[int, bytes]:
    """The tagged fields (known ones checked for their size; unknown ones skipped)."""
    tags: dict[int, bytes] = {}
    for _ in range(_unsigned_varint(reader)):
        tag = _unsigned_varint(reader)
        data = reader._take(_unsigned_varint(reader))
        if tag in _TAG_SIZES and len(data) != _TAG_SIZES[tag]:
            raise ValueError(f"{reader.what}: tag {tag} has {len(data)} bytes; expected {_TAG_SIZES[tag]}")
        tags[tag] = data
    return tags


def _skip_tags(reader: _Reader) -> None:
    _read_tags(reader)
