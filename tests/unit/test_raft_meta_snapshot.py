"""Metadata snapshots: image -> bytes -> image (round trip, digest), refusals, the snapshot delta,
and the replicated state's snapshot-plus-tail bookkeeping (`quorum._MetadataLog`)."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.image import MetadataImage, SnapshotLoaded
from raftka.raft_meta.metadata.records import (
    Config,
    ControllerClaim,
    Partition,
    PartitionChange,
    ProducerIds,
    RecordBatch,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    encode_record,
)
from raftka.raft_meta.metadata.snapshot import (
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    image_digest,
    snapshot_delta,
)

L = (("PLAINTEXT", "127.0.0.1", 9092), ("CONTROLLER", "127.0.0.1", 9093))
T1, T2, T3 = (f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))

RECORDS = [
    ControllerClaim(1, 3, "cluster-A", request_id="claim-1-3"),
    RegisterBroker(1, "inc-1", L, "rack-a", request_id="reg-1"),
    RegisterBroker(2, "inc-2", L, None, request_id="reg-2"),
    UnfenceBroker(2, 3),
    RecordBatch((encode_record(Topic("t1", T1, (("cleanup.policy", "compact"),))),
                 encode_record(Partition(T1, 0, (1, 2), (1, 2), 1)),
                 encode_record(Partition(T1, 1, (2, 1), (2,), 2, 4, 7))), request_id="create-t1"),
    Topic("t2", T2),
    Partition(T2, 0, (2,), (2,), 2),
    Topic("t3", T3),
    PartitionChange(T1, 1, 7, isr=(2, 1)),
    Config("cluster", "", "auto.create.topics.enable", "false"),
    Config("broker", "1", "log.retention.ms", "1000"),
    ProducerIds(2, 3, 0, 1000),
    RemoveTopic(T3, request_id="delete-t3"),
]


def _image() -> MetadataImage:
    return replay([(i + 1, r) for i, r in enumerate(RECORDS)])


def test_round_trip_keeps_every_field_and_order() -> None:
    image = _image()
    assert image.topics and image.configs and image.producer_id_blocks and image.request_id_order
    back = decode_snapshot(encode_snapshot(image))
    assert back == image
    assert list(back.topics) == list(image.topics) and list(back.configs) == list(image.configs)
    assert back.request_id_order == image.request_id_order
    assert image_digest(back) == image_digest(image)
    assert encode_snapshot(back) == encode_snapshot(image)


def test_records_after_a_snapshot_apply_as_on_the_full_log() -> None:
    offsets = [(i + 1, r) for i, r in enumerate(RECORDS)]
    for cut in range(len(offsets) + 1):
        snapshot = decode_snapshot(encode_snapshot(replay(offsets[:cut])))
        assert replay(offsets[cut:], snapshot) == replay(offsets), cut


def test_digest_ignores_map_order_and_sees_content() -> None:
    image = _image()
    reordered = MetadataImage(**{**image.__dict__, "topics": dict(reversed(image.topics.items())),
                                 "brokers": dict(reversed(image.brokers.items()))})
    assert image_digest(reordered) == image_digest(image)
    changed = replay([(len(RECORDS) + 1, Config("cluster", "", "x", "y"))], image)
    assert image_digest(changed) != image_digest(image)
    assert image_digest(MetadataImage()) == image_digest(decode_snapshot(encode_snapshot(MetadataImage())))


def _tampered(**changes) -> bytes:
    body = cbor2.loads(encode_snapshot(_image()))
    for key, value in changes.items():
        if value is ...:
            del body[key]
        else:
            body[key] = value
    return cbor2.dumps(body)


BAD = {
    "not cbor": (b"\xff\xfe", "not CBOR"),
    "not a map": (cbor2.dumps([1, 2]), "expected a CBOR map, got list"),
    "a record, not a snapshot": (encode_record(Topic("t", T1)), "type 'Topic' is not 'MetadataSnapshot'"),
    "newer version": (_tampered(v=3), "snapshot version 3 is not supported (expected one of [1, 2])"),
    "missing field": (_tampered(configs=...), "fields missing: ['configs']"),
    "offset not int": (_tampered(offset="7"), "offset: expected an integer, got '7'"),
    "broker short": (_tampered(brokers=[[1, "inc", 2]]), "broker: expected a list of 6 items"),
    "broker fenced not bool": (_tampered(brokers=[[1, "inc", 2, [], None, 0]]), "broker 1 fenced: expected a boolean"),
    "partition twice": (_tampered(topics=[[T1, "t", [[0, [1], [1], 1, 0, 0], [0, [1], [1], 1, 0, 0]]]]),
                        "topic 't' partition 0: listed twice"),
    "replica not int": (_tampered(topics=[[T1, "t", [[0, ["1"], [1], 1, 0, 0]]]]), "topic 't' partition 0 replicas"),
    "topic twice": (_tampered(topics=[[T1, "t", []], [T2, "t", []]]), "topic 't' (" ),
    "config value not str": (_tampered(configs=[["topic", "t", [["k", 5]]]]), "value: expected a string, got 5"),
    "controller short": (_tampered(controller=[1]), "controller: expected a list of 2 items"),
    "request id twice": (_tampered(request_ids=["a", "a"]), "request_ids: an id is listed twice"),
}


@pytest.mark.parametrize("raw, message", BAD.values(), ids=BAD.keys())
def test_bad_snapshots_are_refused_by_name(raw: bytes, message: str) -> None:
    with pytest.raises(SnapshotError) as info:
        decode_snapshot(raw)
    assert message in str(info.value)


def test_snapshot_delta_names_everything_and_the_topics_gone() -> None:
    before = _image()
    after = replay([(20, RemoveTopic(T2)), (21, Topic("t4", T3)), (22, Partition(T3, 0, (1,), (1,), 1))], before)
    delta = snapshot_delta(before, after)
    assert delta.accepted and delta.record == SnapshotLoaded(22) and delta.offset == 22
    assert [t.topic_id for t in delta.removed_topics] == [T2]
    assert delta.topics == frozenset(after.topics)
    assert delta.partitions == {(T1, 0), (T1, 1), (T3, 0)}
    assert delta.brokers == {1, 2} and delta.producer_ids and delta.controller
    assert ("broker", "1") in delta.configs and ("topic", "t1") in delta.configs
    assert snapshot_delta(MetadataImage(), after).removed_topics == ()


# --- property: any image that `apply` can build round-trips --------------------------------

_ids = st.integers(min_value=1, max_value=4)
_names = st.sampled_from(["a", "b", "c", "d"])
_topic_ids = st.sampled_from([T1, T2, T3])
_replicas = st.lists(_ids, min_size=1, max_size=3, unique=True).map(tuple)
_record = st.one_of(
    st.builds(RegisterBroker, _ids, st.text(max_size=4), st.just(L), st.none() | st.text(max_size=3),
              request_id=st.none() | st.text(max_size=3)),
    st.builds(UnfenceBroker, _ids, st.integers(1, 30)),
    st.builds(Topic, _names, _topic_ids, st.sampled_from([(), (("retention.ms", "5"),)])),
    st.builds(RemoveTopic, _topic_ids),
    _replicas.flatmap(lambda r: st.builds(Partition, _topic_ids, st.integers(0, 3), st.just(r), st.just(r),
                                          st.sampled_from(r))),
    st.builds(PartitionChange, _topic_ids, st.integers(0, 3), st.integers(0, 3), isr=st.none() | _replicas),
    st.builds(Config, st.sampled_from(["cluster", "broker", "topic"]), st.sampled_from(["", "1", "a"]),
              st.sampled_from(["k1", "k2"]), st.none() | st.text(max_size=5)),
    st.builds(ProducerIds, _ids, st.integers(1, 30), st.sampled_from([0, 100, 200]), st.integers(1, 100)),
    st.builds(ControllerClaim, _ids, st.integers(0, 5), st.just("cluster-A")),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_record, max_size=40))
def test_property_round_trip_and_digest(records) -> None:
    image = replay([(i + 1, r) for i, r in enumerate(records)])
    back = decode_snapshot(encode_snapshot(image))
    assert back == image
    assert image_digest(back) == image_digest(image)


# --- the replicated state after a dump load (`quorum._MetadataLog._deserialize`) ---------------


def _state(**fields):
    from raftka.raft_meta.quorum.quorum import _MetadataLog

    changes = []
    state = _MetadataLog(lambda: changes.append(1), snapshot_bytes=1 << 20)
    state._deserialize(fields)
    return state, changes


def test_a_dump_of_snapshot_and_tail_rebuilds_the_image_at_the_last_offset() -> None:
    offsets = [(i + 1, r) for i, r in enumerate(RECORDS)]
    cut = 6
    tail = [(o, encode_record(r)) for o, r in offsets[cut:]]
    state, changes = _state(snapshot=encode_snapshot(replay(offsets[:cut])), snapshot_offset=cut,
                            offsets=[o for o, _ in tail], payloads=[p for _, p in tail],
                            tail_bytes=sum(len(p) for _, p in tail), last=len(RECORDS))
    assert state.image == replay(offsets) and state.last == len(RECORDS) and changes == [1]
    assert state.dump_loads == 1


def test_a_dump_written_before_snapshots_is_a_tail_without_a_snapshot() -> None:
    payloads = [encode_record(r) for r in RECORDS]
    state, _ = _state(offsets=list(range(1, len(RECORDS) + 1)), payloads=payloads)
    assert state.snapshot is None and state.snapshot_offset == 0
    assert state.last == len(RECORDS) and state.tail_bytes == sum(map(len, payloads))
    assert state.image == replay([(i + 1, r) for i, r in enumerate(RECORDS)])


def test_the_dump_holds_the_snapshot_and_tail_not_the_working_image() -> None:
    state, _ = _state(offsets=[1], payloads=[encode_record(RECORDS[0])])
    assert state.image.offset == 1
    assert sorted(state._serialize()) == ["last", "offsets", "payloads", "snapshot", "snapshot_offset", "tail_bytes"]
