"""A topic's compression.type: the leader stores batches with the topic's codec (Kafka's rule),
keeping records, offsets, timestamps and the idempotent producer's fields."""

from __future__ import annotations

import pytest

from raftka.log.batch_header import ATTR_CODEC_MASK
from raftka.log.compression import Compression
from raftka.log.record_batch import Record, encode_batch, iter_batches


def _batch(codec: int, *, seq: int = 0, pid: int = 7) -> bytes:
    records = [Record(b"k%d" % i, b"value-%d" % i * 20, ((("h", b"x"),) if i == 1 else ()), 1_000 + i, i)
               for i in range(3)]
    return encode_batch(records, compression=codec, producer_id=pid, producer_epoch=0, base_sequence=seq)


@pytest.mark.parametrize(("topic_type", "sent", "stored"), [
    ("zstd", Compression.GZIP, Compression.ZSTD),
    ("gzip", Compression.NONE, Compression.GZIP),
    ("uncompressed", Compression.LZ4, Compression.NONE),
    ("snappy", Compression.SNAPPY, Compression.SNAPPY),  # same codec: the bytes are kept as sent
    ("producer", Compression.GZIP, Compression.GZIP),
])
def test_batches_are_stored_with_the_topics_codec(open_log, topic_type, sent, stored) -> None:
    log = open_log(compression_type=topic_type)
    sent_bytes = _batch(sent)
    info = log.append(sent_bytes, 3, now_ms=0)
    assert (info.first_offset, info.last_offset) == (0, 2)
    [batch] = list(iter_batches(log.read_bytes(0, 10**6)))
    assert batch.header.attributes & ATTR_CODEC_MASK == stored
    [original] = list(iter_batches(sent_bytes))
    assert [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in batch.records] == \
        [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in original.records]
    h = batch.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (7, 0, 0, 3)
    # the idempotent producer's retry is still recognised as a duplicate
    again = log.append(sent_bytes, 3, now_ms=0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 2)
