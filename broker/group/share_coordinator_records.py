"""The keys and values of `__share_group_state` records, in Kafka's coordinator formats.

Keys are non-flexible: the record type as an i16 (0 ShareSnapshot, 1 ShareUpdate), then
ShareSnapshotKey/ShareUpdateKey v0 (GroupId string, TopicId uuid, Partition int32).
Values are the i16 value version 0 then the flexible ShareSnapshotValue/ShareUpdateValue
v0 (compact arrays, tagged fields; DeliveryCompleteCount is tag 0, written when not -1),
as in Kafka's share-coordinator `common/message/Share*.json`. A null value is a tombstone
(ShareSnapshot only). Decoding raises ValueError naming what was malformed.
"""

from __future__ import annotations

import struct

from raftka.broker.group.share_coordinator_state import (
    SNAPSHOT,
    UPDATE,
    ShareGroupOffset,
    ShareRecord,
    StateBatch,
)
from raftka.broker.group.share_persister import ShareStateKey
from raftka.client.protocol import ProtocolError
from raftka.client.protocol.codec import MessageCodec
from raftka.client.protocol.schema import Field as F
from raftka.client.protocol.schema import MessageSchema

VALUE_VERSION = 0

_KEY = MessageCodec(MessageSchema("ShareKey", -1, "data", "0", flexible="none", fields=(
    F("group_id", "string", "0"), F("topic_id", "uuid", "0"), F("partition", "int32", "0"))))
_BATCHES = F("state_batches", "[]StateBatch", "0+", fields=(
    F("first_offset", "int64", "0+"), F("last_offset", "int64", "0+"), F("delivery_state", "int8", "0+"),
    F("delivery_count", "int16", "0+")))
_COMPLETE = F("delivery_complete_count", "int32", "0+", default=-1, tag=0, tagged="0+")
_VALUES = {
    SNAPSHOT: MessageCodec(MessageSchema("ShareSnapshotValue", -1, "data", "0", flexible="0+", fields=(
        F("snapshot_epoch", "int32", "0+"), F("state_epoch", "int32", "0+"), F("leader_epoch", "int32", "0+"),
        F("start_offset", "int64", "0+"), _COMPLETE, F("create_timestamp", "int64", "0+"),
        F("write_timestamp", "int64", "0+"), _BATCHES))),
    UPDATE: MessageCodec(MessageSchema("ShareUpdateValue", -1, "data", "0", flexible="0+", fields=(
        F("snapshot_epoch", "int32", "0+"), F("leader_epoch", "int32", "0+"), F("start_offset", "int64", "0+"),
        _COMPLETE, _BATCHES))),
}


def encode_record(record: ShareRecord) -> tuple[bytes, bytes | None]:
    """(key, value) of one record."""
    k = record.key
    key = struct.pack(">h", record.kind) + _KEY.encode(
        _KEY.cls(group_id=k.group_id, topic_id=k.topic_id, partition=k.partition), 0)
    v = record.value
    if v is None:
        return key, None
    codec = _VALUES[record.kind]
    batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count} for b in v.batches]
    fields = dict(snapshot_epoch=v.snapshot_epoch, leader_epoch=v.leader_epoch, start_offset=v.start_offset,
                  delivery_complete_count=v.delivery_complete_count, state_batches=batches)
    if record.kind == SNAPSHOT:
        fields.update(state_epoch=v.state_epoch, create_timestamp=v.create_timestamp,
                      write_timestamp=v.write_timestamp)
    return key, struct.pack(">h", VALUE_VERSION) + codec.encode(codec.cls(**fields), 0)


def decode_record(key: bytes, value: bytes | None) -> ShareRecord | None:
    """The record of a (key, value); None for a record type this coordinator does not know
    (Kafka skips those). Raises ValueError for a malformed key or value."""
    try:
        return _decode(key, value)
    except ProtocolError as exc:
        raise ValueError(f"__share_group_state record: {exc}") from None


def _decode(key: bytes, value: bytes | None) -> ShareRecord | None:
    if len(key) < 2:
        raise ValueError(f"__share_group_state key of {len(key)} byte(s): expected at least 2")
    kind = struct.unpack_from(">h", key, 0)[0]
    if kind not in _VALUES:
        return None
    k, end = _KEY.decode(key, 0, 2)
    if end != len(key):
        raise ValueError(f"__share_group_state key has {len(key) - end} trailing byte(s)")
    if k.partition < 0:
        raise ValueError(f"__share_group_state key has a negative partition {k.partition}")
    share_key = ShareStateKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        if kind != SNAPSHOT:
            raise ValueError("a ShareUpdate record has no value (only snapshots are tombstoned)")
        return ShareRecord(SNAPSHOT, share_key, None)
    if len(value) < 2:
        raise ValueError(f"__share_group_state value of {len(value)} byte(s): expected at least 2")
    version = struct.unpack_from(">h", value, 0)[0]
    if version != VALUE_VERSION:
        raise ValueError(f"__share_group_state record type {kind} value version {version}; expected {VALUE_VERSION}")
    v, _ = _VALUES[kind].decode(value, 0, 2)
    batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in v.state_batches)
    if kind == SNAPSHOT:
        offset = ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                  v.delivery_complete_count, batches, v.create_timestamp, v.write_timestamp)
    else:
        offset = ShareGroupOffset(v.snapshot_epoch, 0, v.leader_epoch, v.start_offset, v.delivery_complete_count,
                                  batches)
    return ShareRecord(kind, share_key, offset)
