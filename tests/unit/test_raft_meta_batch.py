"""RecordBatch: several records in one Raft entry, applied together at one offset."""

from __future__ import annotations

from raftka.raft_meta.apply import apply_entry, replay
from raftka.raft_meta.records import (
    Partition,
    RecordBatch,
    RegisterBroker,
    Topic,
    decode_record,
    encode_record,
)


def _registered():
    return replay([(1, RegisterBroker(1, "inc-1", (("PLAINTEXT", "127.0.0.1", 9092),))),
                   (2, RegisterBroker(2, "inc-2", (("PLAINTEXT", "127.0.0.1", 9192),)))])


def _topic_batch(partitions: int) -> RecordBatch:
    records = [Topic("t", "tid-1")] + [Partition("tid-1", i, (1, 2), (1, 2), 1) for i in range(partitions)]
    return RecordBatch(tuple(encode_record(r) for r in records))


def test_a_batch_applies_every_record_at_its_offset():
    image, deltas = apply_entry(_registered(), _topic_batch(50), 3)
    assert image.offset == 3
    assert len(deltas) == 51 and all(d.accepted and d.offset == 3 for d in deltas)
    topic = image.topic_by_name("t")
    assert sorted(topic.partitions) == list(range(50))


def test_a_batch_round_trips_and_replays_like_the_loader():
    batch = _topic_batch(3)
    assert decode_record(encode_record(batch)) == batch
    image = replay([(3, batch)], _registered())
    assert len(image.topic_by_name("t").partitions) == 3


def test_a_replayed_batch_offset_is_rejected_whole():
    image, _ = apply_entry(_registered(), _topic_batch(2), 3)
    again, deltas = apply_entry(image, _topic_batch(2), 3)
    assert again == image
    assert len(deltas) == 1 and not deltas[0].accepted


def test_a_rejected_record_inside_a_batch_skips_only_itself():
    bad = Partition("no-such-topic", 0, (1,), (1,), 1)
    batch = RecordBatch((encode_record(Topic("t", "tid-1")), encode_record(bad),
                         encode_record(Partition("tid-1", 0, (1,), (1,), 1))))
    image, deltas = apply_entry(_registered(), batch, 3)
    assert [d.accepted for d in deltas] == [True, False, True]
    assert list(image.topic_by_name("t").partitions) == [0]


def test_garbage_inside_a_batch_is_skipped_not_fatal():
    batch = RecordBatch((b"\xff\x00garbage", encode_record(Topic("t", "tid-1"))))
    image, deltas = apply_entry(_registered(), batch, 3)
    assert [d.accepted for d in deltas] == [False, True]
    assert image.topic_by_name("t") is not None
