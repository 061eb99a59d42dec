"""The fuzzer's pure core (tests/fuzz/): its corpus covers every advertised API and
version, its layout walker finds the right bytes, its frames are deterministic per
(seed, index), and its batches are what they claim (valid ones decode everywhere,
malformed ones still carry a valid CRC)."""

from __future__ import annotations

import random
import struct

import crc32c
import pytest
from kafka.record.memory_records import MemoryRecords

from raftka.client.protocol import ApiKey, decode_request, encode_request
from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS, DECLARED_VERSIONS
from raftka.log.record_batch import iter_batches
from tests.fuzz.batches import mutated_batch, valid_batch
from tests.fuzz.corpus import corpus
from tests.fuzz.layout import Span, request_layout
from tests.fuzz.mutate import ALL_KINDS, PROTOCOL_KINDS, Mutator
from tests.unit.kafka_python_codecs import pyarrow_backed_kafka_codecs


def test_corpus_covers_every_advertised_api_and_version() -> None:
    covered = {(e.api_key, e.version) for e in corpus()}
    for key, (low, high) in ADVERTISED_VERSIONS.items():
        assert {(key, v) for v in range(low, high + 1)} <= covered, key.name
    assert (ApiKey.API_VERSIONS, DECLARED_VERSIONS[ApiKey.API_VERSIONS][1]) in covered  # v3, flexible


@pytest.mark.parametrize("entry", corpus(), ids=lambda e: e.name)
def test_corpus_frames_are_valid_and_walk_exactly(entry) -> None:
    for seed in range(4):
        frame = entry.frame(random.Random(seed), 7)
        header, _ = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id) == (entry.api_key, entry.version, 7)
        spans = request_layout(frame[4:])  # raises unless the walk ends exactly at the end
        assert spans[:3] == [Span("int16", 0, 2, entry.api_key), Span("int16", 2, 2, entry.version),
                             Span("int32", 4, 4, 7)]


def test_layout_of_a_known_request() -> None:
    frame = encode_request(ApiKey.METADATA, 4, 9, {"topics": [{"name": "ab"}, {"name": "c"}],
                                                   "allow_auto_topic_creation": True}, client_id="x")
    # header: key, version, correlation, client id length; body: topics array, 2 strings, bool
    assert request_layout(frame[4:]) == [
        Span("int16", 0, 2, 3), Span("int16", 2, 2, 4), Span("int32", 4, 4, 9), Span("len16", 8, 2, 1),
        Span("len32", 11, 4, 2), Span("len16", 15, 2, 2), Span("len16", 19, 2, 1),
    ]
    produce = encode_request(ApiKey.PRODUCE, 8, 1, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": b"R" * 70}]}]}, client_id="")
    records = [s for s in request_layout(produce[4:]) if s.kind == "records"]
    assert records == [Span("records", len(produce) - 4 - 70, 70)]


def test_layout_of_flexible_versions() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 3, 2, {"client_software_name": "ab",
                                                       "client_software_version": "1"}, client_id="c")
    spans = request_layout(frame[4:])
    # compact strings: unsigned varint length + 1; tagged sections: a count of 0
    assert [s for s in spans if s.kind == "ulen"] == [Span("ulen", 12, 1, 2), Span("ulen", 15, 1, 1)]


def test_layout_refuses_what_is_not_a_valid_request() -> None:
    frame = encode_request(ApiKey.METADATA, 4, 9, {"topics": [], "allow_auto_topic_creation": True})
    with pytest.raises(ValueError, match="the walk ended at"):
        request_layout(frame[4:] + b"\x00")


def test_frames_are_deterministic_per_seed_and_index() -> None:
    first, again, other = Mutator(7), Mutator(7), Mutator(8)
    assert [first.frame(i) for i in range(300)] == [again.frame(i) for i in range(300)]
    assert Mutator(7).frame(250) == first.frame(250)  # one frame replays alone
    assert [first.frame(i).data for i in range(50)] != [other.frame(i).data for i in range(50)]


def test_every_kind_is_used_and_mutates() -> None:
    mutator = Mutator(3)
    frames = [mutator.frame(i) for i in range(3000)]
    assert {f.kind for f in frames} == ALL_KINDS
    for f in frames:
        size = struct.unpack_from(">i", f.data)[0]
        if f.kind != "frame_size":
            assert size == len(f.data) - 4, f.describe(3)  # the size prefix tells the truth
        if f.kind == "none":
            decode_request(f.data[4:])  # valid
    assert "batch" not in {Mutator(3, PROTOCOL_KINDS).frame(i).kind for i in range(500)}


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="mutation kinds \\['bogus'\\]"):
        Mutator(1, frozenset({"bogus"}))


def test_valid_batches_decode_in_raftka_and_kafka_python() -> None:
    rng = random.Random(5)
    with pyarrow_backed_kafka_codecs():
        for _ in range(60):
            spec = valid_batch(rng)
            data = spec.encode()
            (ours,) = list(iter_batches(data))
            theirs = MemoryRecords(data).next_batch()
            assert theirs.validate_crc()
            theirs_records = [(r.key, r.value, tuple(r.headers)) for r in theirs]
            assert [(r.key, r.value, tuple(r.headers)) for r in ours.records] == theirs_records
            assert len(ours.records) == len(spec.records) == ours.header.record_count


def test_malformed_batches_still_pass_the_crc_check() -> None:
    rng = random.Random(6)
    undecodable = 0
    kinds = set()
    with pyarrow_backed_kafka_codecs():
        for _ in range(400):
            what, data = mutated_batch(rng)
            kinds.add(what.split("_")[0])
            assert struct.unpack_from(">I", data, 17)[0] == crc32c.crc32c(data[21:]), what
            try:
                batch = MemoryRecords(data).next_batch()
                if sum(1 for _ in batch) != batch.records_count:
                    raise ValueError("count")
            except Exception:  # noqa: BLE001 - any failure to decode is what the mutation aims at
                undecodable += 1
    assert undecodable > 200  # most cannot be decoded (some, e.g. odd deltas, decode but are wrong)
    assert len(kinds) >= 10
