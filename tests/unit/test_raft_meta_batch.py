"""RecordBatch: several records in one Raft entry, applied together at one offset."""

from __future__ import annotations

from raftka.raft_meta.metadata.apply import apply, apply_entry, replay
from raftka.raft_meta.metadata.records import (
    Config,
    ControllerClaim,
    FenceBroker,
    Partition,
    PartitionChange,
    ProducerIds,
    RecordBatch,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
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


# --- cost: one entry copies each map it touches once, not once per record --------------

def _count_replaces(monkeypatch) -> dict[str, int]:
    """Count `dataclasses.replace` calls in `apply`, by the type of the object replaced."""
    import dataclasses

    from raftka.raft_meta.metadata import apply as apply_module

    counts: dict[str, int] = {}
    real = dataclasses.replace

    def counting(obj, /, **changes):
        counts[type(obj).__name__] = counts.get(type(obj).__name__, 0) + 1
        return real(obj, **changes)

    monkeypatch.setattr(apply_module.dataclasses, "replace", counting)
    return counts


def test_a_topic_batch_copies_its_partition_map_once_not_per_record(monkeypatch):
    start, batch = _registered(), _topic_batch(2000)
    counts = _count_replaces(monkeypatch)
    image, deltas = apply_entry(start, batch, 3)
    assert len(image.topic_by_name("t").partitions) == 2000 and all(d.accepted for d in deltas)
    # The old apply copied the topic (and its whole partition map) once per Partition record: 2000 times.
    assert counts.get("TopicImage", 0) <= 1
    assert counts.get("MetadataImage", 0) <= 1


def test_a_batch_of_partition_changes_copies_the_partition_map_once(monkeypatch):
    image, _ = apply_entry(_registered(), _topic_batch(2000), 3)
    counts = _count_replaces(monkeypatch)
    changes = RecordBatch(tuple(encode_record(PartitionChange("tid-1", i, 0, isr=(1,))) for i in range(2000)))
    after, deltas = apply_entry(image, changes, 4)
    assert all(d.accepted for d in deltas)
    assert all(p.isr == (1,) and p.partition_epoch == 1 for p in after.topic_by_name("t").partitions.values())
    assert counts.get("TopicImage", 0) <= 1 and counts.get("MetadataImage", 0) <= 1


# --- the images a batch starts from and hands out never change ---------------------------

MIXED = [
    Topic("t", "tid-1", (("cleanup.policy", "compact"),)),
    Partition("tid-1", 0, (1, 2), (1, 2), 1),
    Partition("tid-1", 1, (2, 1), (2, 1), 2),
    PartitionChange("tid-1", 0, 0, isr=(1,)),
    UnfenceBroker(1, 1),
    Config("topic", "t", "retention.ms", "1000"),
    Config("cluster", "", "unclean.leader.election.enable", "true"),
    ProducerIds(1, 1, 0, 1000),
    Partition("tid-1", 1, (1,), (1,), 1),  # rejected: exists
    RemoveTopic("tid-1"),
    Topic("t", "tid-1"),  # the same id again: a new, empty topic
    Partition("tid-1", 0, (2,), (2,), 2),
    ControllerClaim(1, 5, "cluster-a", request_id="claim-1"),
    ControllerClaim(1, 5, "cluster-a", request_id="claim-1"),  # rejected: duplicate request id
    FenceBroker(2, 2),
]


def test_a_batch_reaches_the_image_record_by_record_application_reaches():
    start = _registered()
    batched, batch_deltas = apply_entry(start, RecordBatch(tuple(encode_record(r) for r in MIXED)), 3)
    single = start
    single_deltas = []
    for i, record in enumerate(MIXED):
        single, delta = apply(single, record, 3, continuation=i > 0)
        single_deltas.append(delta)
    assert batched == single
    assert [(d.accepted, d.reason) for d in batch_deltas] == [(d.accepted, d.reason) for d in single_deltas]
    assert [d.accepted for d in batch_deltas] == [True] * 8 + [False] + [True] * 4 + [False, True]


def test_a_batch_changes_neither_its_starting_image_nor_the_topics_it_handed_out():
    start = _registered()
    first, _ = apply_entry(start, RecordBatch(tuple(encode_record(r) for r in MIXED[:8])), 3)
    twin = replay([(3, RecordBatch(tuple(encode_record(r) for r in MIXED[:8])))], _registered())
    topic_before = first.topic_by_name("t")
    parts_before = dict(topic_before.partitions)
    second, deltas = apply_entry(first, RecordBatch(tuple(encode_record(r) for r in MIXED[8:])), 4)
    assert first == twin and start == _registered()
    assert topic_before.partitions == parts_before
    removed = next(d for d in deltas if d.removed_topics).removed_topics[0]
    assert sorted(removed.partitions) == [0, 1]  # not touched by the Partition record after the re-creation
    assert sorted(second.topic_by_name("t").partitions) == [0]
