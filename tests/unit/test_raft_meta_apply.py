"""Data-driven tests of the metadata state machine: records in, accept/reject + image out."""

from __future__ import annotations

import cbor2
import pytest

from raftka.raft_meta.metadata.apply import apply, replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    NO_LEADER,
    Config,
    ControllerClaim,
    FenceBroker,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UndecodableRecord,
    UnfenceBroker,
    UnregisterBroker,
    decode_record,
    encode_record,
)

T = "00000000-0000-0000-0000-00000000000a"
L = (("PLAINTEXT", "127.0.0.1", 9092),)

# Offsets 1..: register brokers 1,2,3 (epochs 1,2,3), a topic with one partition.
BASE = [
    RegisterBroker(1, "inc-1", L, "r1"),
    RegisterBroker(2, "inc-2", L, "r2"),
    RegisterBroker(3, "inc-3", L, None),
    Topic("t", T, (("cleanup.policy", "compact"),)),
    Partition(T, 0, (1, 2, 3), (1, 2, 3), 1),
]

# Each scenario: steps after BASE as (record, accepted?, reason substring or None),
# then a check on the final image.
SCENARIOS = {
    "register starts fenced, epoch is offset": (
        [],
        lambda img: img.brokers[2].epoch == 2 and img.brokers[2].fenced and img.brokers[1].rack == "r1",
    ),
    "unfence with right epoch": (
        [(UnfenceBroker(2, 2), True, None)],
        lambda img: not img.brokers[2].fenced and [b.broker_id for b in img.live_brokers()] == [2],
    ),
    "unfence with stale broker epoch rejected": (
        [(UnfenceBroker(2, 1), False, "epoch 1 is stale")],
        lambda img: img.brokers[2].fenced,
    ),
    "re-register bumps epoch, old epoch fenced out": (
        [
            (RegisterBroker(2, "inc-2b", L, None), True, None),
            (UnfenceBroker(2, 2), False, "stale"),
            (UnfenceBroker(2, 6), True, None),
        ],
        lambda img: img.brokers[2].epoch == 6 and not img.brokers[2].fenced and img.brokers[2].incarnation_id == "inc-2b",
    ),
    "fence then unregister": (
        [(UnfenceBroker(3, 3), True, None), (FenceBroker(3, 3), True, None), (UnregisterBroker(3, 3), True, None)],
        lambda img: 3 not in img.brokers,
    ),
    "unregister unknown broker rejected": (
        [(UnregisterBroker(9, 1), False, "not registered")],
        lambda img: set(img.brokers) == {1, 2, 3},
    ),
    "topic name and id unique": (
        [
            (Topic("t", "other-id"), False, "already exists"),
            (Topic("u", T), False, "already exists"),
        ],
        lambda img: list(img.topic_ids) == ["t"] and img.topic_config("t", "cleanup.policy") == "compact",
    ),
    "partition change bumps epochs": (
        [(PartitionChange(T, 0, 0, leader=2, isr=(2, 3)), True, None)],
        lambda img: img.partition(T, 0).leader == 2
        and img.partition(T, 0).leader_epoch == 1
        and img.partition(T, 0).partition_epoch == 1
        and img.partition(T, 0).isr == (2, 3),
    ),
    "isr-only change keeps leader epoch": (
        [(PartitionChange(T, 0, 0, isr=(1, 2)), True, None)],
        lambda img: (img.partition(T, 0).leader_epoch, img.partition(T, 0).partition_epoch) == (0, 1),
    ),
    "stale partition epoch rejected": (
        [
            (PartitionChange(T, 0, 0, isr=(1, 2)), True, None),
            (PartitionChange(T, 0, 0, isr=(1,)), False, "partition epoch 0"),
        ],
        lambda img: img.partition(T, 0).isr == (1, 2),
    ),
    "leader outside isr rejected": (
        [(PartitionChange(T, 0, 0, leader=3, isr=(1, 2)), False, "not in ISR")],
        lambda img: img.partition(T, 0).leader == 1,
    ),
    "no leader allowed": (
        [(PartitionChange(T, 0, 0, leader=NO_LEADER, isr=(1,)), True, None)],
        lambda img: not img.partition(T, 0).has_leader and img.partition(T, 0).leader_epoch == 1,
    ),
    "partition of unknown topic rejected": (
        [(Partition("nope", 0, (1,), (1,), 1), False, "does not exist")],
        lambda img: "nope" not in img.topics,
    ),
    "duplicate partition rejected": (
        [(Partition(T, 0, (1,), (1,), 1), False, "already exists")],
        lambda img: img.partition(T, 0).replicas == (1, 2, 3),
    ),
    "remove topic drops configs and name": (
        [(RemoveTopic(T), True, None), (RemoveTopic(T), False, "does not exist")],
        lambda img: img.topics == {} and img.topic_ids == {} and ("topic", "t") not in img.configs,
    ),
    "config set and delete": (
        [
            (Config("cluster", "", "min.insync.replicas", "2"), True, None),
            (Config("topic", "t", "cleanup.policy", None), True, None),
            (Config("topic", "missing", "a", "b"), False, "does not exist"),
            (Config("galaxy", "x", "a", "b"), False, "resource type"),
        ],
        lambda img: img.cluster_config("min.insync.replicas") == "2" and ("topic", "t") not in img.configs,
    ),
    "producer id blocks are contiguous, stale rejected": (
        [
            (ProducerIds(1, 1, 0, 1000), True, None),
            (ProducerIds(2, 2, 0, 1000), False, "stale"),
            (ProducerIds(2, 2, 1000, 1000), True, None),
            (ProducerIds(3, 99, 2000, 1000), False, "epoch 99"),
        ],
        lambda img: img.next_producer_id == 2000 and img.producer_id_blocks == {1: (0, 1000), 2: (1000, 1000)},
    ),
    "controller claims only move forward": (
        [
            (ControllerClaim(1, 3, "cid"), True, None),
            (ControllerClaim(2, 2, "cid"), False, "stale"),
            (ControllerClaim(2, 3, "cid"), False, "stale"),
            (ControllerClaim(1, 3, "cid"), True, None),
            (ControllerClaim(2, 4, "other"), False, "cluster"),
            (ControllerClaim(2, 4, "cid"), True, None),
        ],
        lambda img: (img.controller.node_id, img.controller.epoch, img.cluster_id) == (2, 4, "cid"),
    ),
    "duplicate request id is applied once": (
        [
            (Topic("u", "id-u", request_id="req-1"), True, None),
            (Topic("v", "id-v", request_id="req-1"), False, "duplicate request id"),
        ],
        lambda img: "v" not in img.topic_ids and "u" in img.topic_ids,
    ),
    "undecodable record skipped": (
        [(UndecodableRecord(b"\xff", "garbage"), False, "garbage")],
        lambda img: img.offset == len(BASE) + 1,
    ),
    "malformed field types skipped, not raised": (
        [(PartitionChange(T, 0, 0, isr=5), False, "malformed")],  # type: ignore[arg-type]
        lambda img: img.partition(T, 0).isr == (1, 2, 3),
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str) -> None:
    steps, check = SCENARIOS[name]
    image = MetadataImage()
    for offset, record in enumerate(BASE, start=1):
        image, delta = apply(image, record, offset)
        assert delta.accepted, delta.reason
    for offset, (record, accepted, reason) in enumerate(steps, start=len(BASE) + 1):
        image, delta = apply(image, record, offset)
        assert delta.accepted is accepted, (record, delta.reason)
        if reason is not None:
            assert reason in (delta.reason or ""), delta.reason
        assert image.offset == offset
    assert check(image)


def test_apply_is_deterministic_and_offsets_monotonic() -> None:
    records = list(enumerate(BASE, start=1))
    assert replay(records) == replay(records)
    image = replay(records)
    same, delta = apply(image, UnfenceBroker(1, 1), 3)
    assert same is image and not delta.accepted and "not after" in delta.reason


def test_delta_names_what_changed() -> None:
    image = replay(list(enumerate(BASE, start=1)))
    _, delta = apply(image, PartitionChange(T, 0, 0, isr=(1, 2)), 10)
    assert delta.partitions == {(T, 0)} and delta.topics == {T}
    _, delta = apply(image, RemoveTopic(T), 10)
    assert [t.name for t in delta.removed_topics] == ["t"] and delta.partitions == {(T, 0)}


@pytest.mark.parametrize(
    "record",
    [*BASE, PartitionChange(T, 0, 4, leader=2, isr=(2,), unclean=True, request_id="x"), ControllerClaim(1, 7, "c"),
     Config("topic", "t", "k", None), ProducerIds(1, 2, 3, 4), UnregisterBroker(1, 2), FenceBroker(1, 1), RemoveTopic(T)],
)
def test_record_roundtrip(record) -> None:
    assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe", "not CBOR"),
        (cbor2.dumps([1, 2]), "expected a CBOR map"),
        (cbor2.dumps({"type": "Bogus", "v": 1}), "unknown record type"),
        (cbor2.dumps({"type": "Topic", "v": 2, "name": "t", "topic_id": "x"}), "version 2"),
        (cbor2.dumps({"type": "Topic", "v": 1, "name": "t"}), "malformed"),
    ],
)
def test_undecodable_records(raw: bytes, reason: str) -> None:
    record = decode_record(raw)
    assert isinstance(record, UndecodableRecord) and reason in record.reason
    image, delta = apply(MetadataImage(), record, 1)
    assert not delta.accepted and image.offset == 1
