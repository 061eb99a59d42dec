"""Hostile and broken input on raw sockets against a real raftka server process.

Each case checks the three halves of docs/design.md principle 7: the offending
connection gets the right error (or is closed), a well-behaved client keeps
producing on the same broker meanwhile (a librdkafka producer running in a
thread for the whole module), and everything acknowledged before is still
readable, byte for byte.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from raftka.client.protocol import (
    ADVERTISED_VERSIONS,
    ApiKey,
    ErrorCode,
    decode_response,
    encode_request,
)
from raftka.client.protocol.api_keys import SERVED_UNADVERTISED_VERSIONS
from raftka.log.batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    iter_headers,
    pack_header,
    parse_header,
    update_crc,
)
from raftka.log.compression import compress
from raftka.log.record_batch import Record, encode_batch
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import (
    ConnectionClosedByBroker,
    WireConnection,
    batch_values,
    values_batch,
)
from tests.support import wait_until

MAX_REQUEST_BYTES = 1 << 20  # socket.request.max.bytes
MAX_MESSAGE_BYTES = 100_000  # message.max.bytes
TOPIC = "target"
ACKED_TOPIC = "acked-before"
STEADY_TOPIC = "steady"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    properties = {"socket.request.max.bytes": str(MAX_REQUEST_BYTES),
                  "message.max.bytes": str(MAX_MESSAGE_BYTES)}
    with running_server(tmp_path_factory.mktemp("bad-input"), properties=properties) as process:
        with WireConnection(process.bootstrap) as conn:
            for topic, partitions in ((TOPIC, 2), (ACKED_TOPIC, 1), (STEADY_TOPIC, 1)):
                assert conn.create_topic(topic, partitions) == 0
        yield process


@pytest.fixture(scope="module")
def acked_before(server: ServerProcess) -> list[bytes]:
    """Values produced and acknowledged (acks=all) before any bad input."""
    values = [f"acked-{i}".encode() * (i % 7 + 1) for i in range(200)]
    with WireConnection(server.bootstrap) as conn:
        for start in range(0, len(values), 10):
            result = conn.produce(ACKED_TOPIC, 0, values_batch(values[start:start + 10],
                                                               compression=start % 50 // 10))
            assert result.error_code == 0 and result.base_offset == start
    return values


@dataclass
class SteadyProducer:
    """A librdkafka producer sending one message per iteration in a thread, acks=all."""

    bootstrap: str
    delivered: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 0})

        def report(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.delivered.append((msg.offset(), msg.value()))

        index = 0
        while not self.stop.is_set():
            producer.produce(STEADY_TOPIC, value=f"steady-{index}".encode(), on_delivery=report)
            index += 1
            producer.poll(0.01)  # serve delivery callbacks; also paces the loop
        remaining = producer.flush(15)
        if remaining:
            self.errors.append(f"{remaining} messages undelivered at the end")


@pytest.fixture(scope="module")
def steady(server: ServerProcess) -> Iterator[SteadyProducer]:
    producer = SteadyProducer(server.bootstrap)
    thread = threading.Thread(target=producer.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(producer.delivered) >= 5, what="the steady producer's first acks")
        yield producer
    finally:
        producer.stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the steady producer thread did not stop"
    assert not producer.errors, f"the steady producer saw errors: {producer.errors[:5]}"
    # Every acknowledged message is readable at the offset it was acknowledged at.
    with WireConnection(server.bootstrap) as conn:
        stored = {r.offset: r.value for b in conn.read_all(STEADY_TOPIC, 0) for r in b.records}
    assert len(producer.delivered) > 50
    missing = [(o, v) for o, v in producer.delivered if stored.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged messages not found, e.g. {missing[:3]}"


@pytest.fixture
def unaffected(server: ServerProcess, steady: SteadyProducer,
               acked_before: list[bytes]) -> Iterator[None]:
    """Around each case: the other clients keep working and stored data is intact."""
    with WireConnection(server.bootstrap) as bystander:  # connected before the bad input
        assert bystander.fetch(ACKED_TOPIC, 0, 0).error_code == 0
        yield
        acked_so_far = len(steady.delivered)
        wait_until(lambda: len(steady.delivered) >= acked_so_far + 5, timeout=15,
                   what="the steady producer to keep getting acks after the bad input")
        assert batch_values(bystander.read_all(ACKED_TOPIC, 0)) == acked_before
        end = bystander.end_offset(TOPIC, 1)
        result = bystander.produce(TOPIC, 1, values_batch([b"bystander"]))
        assert (result.error_code, result.base_offset) == (0, end)
    assert server.running(), "the server process died"


def expect_close_logged(server: ServerProcess, reason: str | tuple[str, ...], before: int) -> None:
    """The broker logged why it closed the connection (docs/design.md, principle 7)."""
    reasons = (reason,) if isinstance(reason, str) else reason

    def logged() -> list[dict]:
        return server.log_events("connection.closed")[before:]

    events = wait_until(logged, what=f"a connection.closed event ({reason})")
    assert events[-1]["reason"] in reasons, events
    assert events[-1].get("error"), events


def closes_so_far(server: ServerProcess) -> int:
    return len(server.log_events("connection.closed"))


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def with_version(request_frame: bytes, api_key: int, version: int) -> bytes:
    """A copy of a size-prefixed request frame with its header's api_key/version replaced."""
    return request_frame[:4] + struct.pack(">hh", api_key, version) + request_frame[8:]


def produce_frame(records: bytes, version: int = 8, partition: int = 0) -> bytes:
    return encode_request(ApiKey.PRODUCE, version, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
    }, client_id="bad-input")


# -- garbage and framing ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_random_frames_close_the_connection(server: ServerProcess, unaffected: None,
                                            seed: int) -> None:
    rng = random.Random(seed)
    before = closes_so_far(server)
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(frame(rng.randbytes(rng.randrange(1, 3000))))
        assert conn.wait_closed_by_broker() == b""
    # Unparseable (malformed) or an API nobody serves (closed by the dispatcher): either way, logged.
    expect_close_logged(server, ("malformed_request", "handler"), before)


def test_random_stream_closes_the_connection(server: ServerProcess, unaffected: None) -> None:
    rng = random.Random(99)
    stream = b"\x7f" + rng.randbytes(8191)  # the first 4 bytes read as a ~2 GB frame size
    before = closes_so_far(server)
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(stream)
        assert conn.wait_closed_by_broker() == b""
    expect_close_logged(server, "request_too_large", before)


def test_truncated_request_body(server: ServerProcess, unaffected: None) -> None:
    whole = produce_frame(values_batch([b"x" * 100] * 5))
    body = whole[4:]
    for cut in (3, 9, len(body) // 2, len(body) - 1):  # inside the header, the body, the batch
        before = closes_so_far(server)
        with WireConnection(server.bootstrap) as conn:
            conn.send_bytes(frame(body[:cut]))
            assert conn.wait_closed_by_broker() == b"", f"cut at {cut}"
        expect_close_logged(server, "malformed_request", before)


def test_connection_closed_inside_a_frame(server: ServerProcess, unaffected: None) -> None:
    with WireConnection(server.bootstrap) as conn:
        end = conn.end_offset(TOPIC, 0)
    whole = produce_frame(values_batch([b"half-sent"] * 20))
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(whole[: len(whole) // 2])
        conn.sock.shutdown(socket.SHUT_WR)
        assert conn.wait_closed_by_broker() == b""
    with WireConnection(server.bootstrap) as conn:
        assert conn.end_offset(TOPIC, 0) == end, "a half-received produce was appended"


@pytest.mark.parametrize("size", [MAX_REQUEST_BYTES + 1, 2**31 - 1, -1])
def test_oversize_length_prefix(server: ServerProcess, unaffected: None, size: int) -> None:
    before = closes_so_far(server)
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(struct.pack(">i", size) + b"\x00" * 1024)
        assert conn.wait_closed_by_broker() == b""
    expect_close_logged(server, "request_too_large", before)


def test_request_just_under_the_limit_is_served(server: ServerProcess, unaffected: None) -> None:
    """The limit is socket.request.max.bytes, not lower: a big (useless) request still works."""
    with WireConnection(server.bootstrap) as conn:
        metadata = encode_request(ApiKey.METADATA, 8, 1, {
            "topics": [{"name": f"t{i:06d}-" + "n" * 200} for i in range(4000)],
            "allow_auto_topic_creation": False}, client_id="big")
        assert MAX_REQUEST_BYTES // 2 < len(metadata) - 4 <= MAX_REQUEST_BYTES
        conn.send_bytes(metadata)
        _, response = decode_response(ApiKey.METADATA, 8, conn.read_frame())
        assert len(response.topics) == 4000
        assert {t.error_code for t in response.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


# -- versions and APIs -----------------------------------------------------------------


def _kafka_api_raftka_does_not_serve() -> int:
    """The lowest API key Kafka 4.4 defines that raftka neither advertises nor serves: one of
    raftka's ApiKey, else 34 (AlterReplicaLogDirs, which raftka does not define)."""
    served = set(ADVERTISED_VERSIONS) | {key for key, _ in SERVED_UNADVERTISED_VERSIONS}
    return min((int(key) for key in ApiKey if key not in served), default=34)


@pytest.mark.parametrize("api_key", [_kafka_api_raftka_does_not_serve(), 67, 9999, -1])
def test_unknown_api_key_closes_the_connection(server: ServerProcess, unaffected: None,
                                               api_key: int) -> None:
    request = encode_request(ApiKey.METADATA, 1, 5, {"topics": None}, client_id="x")
    before = closes_so_far(server)
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(with_version(request, api_key, 0))
        assert conn.wait_closed_by_broker() == b""
    expect_close_logged(server, "handler", before)


@pytest.mark.parametrize("version", [ADVERTISED_VERSIONS[ApiKey.API_VERSIONS][1] + 1, 127])
def test_too_new_api_versions_gets_the_v0_error_answer(server: ServerProcess, unaffected: None,
                                                       version: int) -> None:
    request = encode_request(ApiKey.API_VERSIONS, 2, 41, {}, client_id="future-client")
    with WireConnection(server.bootstrap) as conn:
        # The body of a too-new request is not parsed: trailing bytes must not matter.
        conn.send_bytes(frame(with_version(request, ApiKey.API_VERSIONS, version)[4:] + b"\x00junk"))
        answer = conn.read_frame()
        # v0 response header (correlation id only), error 35, [ApiVersions' range], no throttle.
        assert answer == struct.pack(">ihihhh", 41, ErrorCode.UNSUPPORTED_VERSION, 1,
                                     ApiKey.API_VERSIONS, *ADVERTISED_VERSIONS[ApiKey.API_VERSIONS])
        # The client then retries with a version the broker supports, on the same connection.
        response = conn.request(ApiKey.API_VERSIONS, 2, {})
        assert response.error_code == 0
        assert {k.api_key for k in response.api_keys} >= {ApiKey.PRODUCE, ApiKey.FETCH}


def _above(api_key: ApiKey) -> int:
    """The first version above what raftka advertises for `api_key`."""
    return ADVERTISED_VERSIONS[api_key][1] + 1


@pytest.mark.parametrize(("api_key", "version"), [
    (ApiKey.METADATA, _above(ApiKey.METADATA)),
    (ApiKey.METADATA, 200),
    (ApiKey.FETCH, _above(ApiKey.FETCH)),
    (ApiKey.FETCH, 3),      # below the advertised minimum
    (ApiKey.PRODUCE, _above(ApiKey.PRODUCE)),
    (ApiKey.LIST_OFFSETS, _above(ApiKey.LIST_OFFSETS)),
])
def test_unsupported_version_of_another_api_closes_the_connection(
        server: ServerProcess, unaffected: None, api_key: int, version: int) -> None:
    request = encode_request(ApiKey.METADATA, 1, 5, {"topics": None}, client_id="x")
    before = closes_so_far(server)
    with WireConnection(server.bootstrap) as conn:
        conn.send_bytes(with_version(request, api_key, version))
        assert conn.wait_closed_by_broker() == b""
    expect_close_logged(server, "handler", before)


def test_produce_v2_gets_unsupported_version_per_partition(server: ServerProcess,
                                                           unaffected: None) -> None:
    with WireConnection(server.bootstrap) as conn:
        end = conn.end_offset(TOPIC, 0)
        result = conn.produce(TOPIC, 0, values_batch([b"old client"]), version=2)
        assert result.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert conn.end_offset(TOPIC, 0) == end
        # The connection stays usable: a v8 produce on it succeeds.
        result = conn.produce(TOPIC, 0, values_batch([b"new client"]))
        assert (result.error_code, result.base_offset) == (0, end)


# -- bad batches -----------------------------------------------------------------------


def test_corrupt_crc_is_rejected_and_nothing_appended(server: ServerProcess,
                                                      unaffected: None) -> None:
    good = values_batch([b"good"] * 3)
    corrupt = bytearray(values_batch([b"payload"] * 3))
    corrupt[-2] ^= 0x40  # inside the records, covered by the CRC
    with WireConnection(server.bootstrap) as conn:
        ends = [conn.end_offset(TOPIC, p) for p in (0, 1)]
        response = conn.request(ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": bytes(corrupt)}, {"index": 1, "records": good}]}]})
        results = {p.index: p for p in response.responses[0].partition_responses}
        assert results[0].error_code == ErrorCode.CORRUPT_MESSAGE
        assert results[0].error_message and "crc" in results[0].error_message.lower()
        # Each partition stands alone: the good batch in the same request was appended.
        assert (results[1].error_code, results[1].base_offset) == (0, ends[1])
        assert conn.end_offset(TOPIC, 0) == ends[0]
        assert conn.end_offset(TOPIC, 1) == ends[1] + 3


def poisoned_batch(values: list[bytes], codec: int = 0) -> bytes:
    """A batch with a valid CRC whose first record claims 11 bytes where it has 8 (the
    hostile review's batch): stored, it would stop every consumer at its offset."""
    plain = bytearray(values_batch(values))
    assert values[0] == b"vv" and plain[HEADER_SIZE] == 8 << 1  # zigzag(8): the body's length
    plain[HEADER_SIZE] = 11 << 1
    records = bytes(plain[HEADER_SIZE:])
    payload = compress(codec, records) if codec else records
    header = dataclasses.replace(parse_header(plain), attributes=codec,
                                 batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload))
    batch = bytearray(pack_header(header) + payload)
    update_crc(batch)
    assert list(iter_headers(bytes(batch), verify=True))  # the CRC is fine
    return bytes(batch)


@pytest.mark.parametrize("codec", [0, 3, 4], ids=["none", "lz4", "zstd"])
def test_malformed_records_under_a_valid_crc_are_refused(server: ServerProcess, unaffected: None,
                                                         codec: int) -> None:
    """Finding 1 of issue 17: the leader walks the records, refuses the batch with
    INVALID_RECORD (Kafka's answer; not retriable) naming the record, stores nothing, and the
    partition keeps serving: later good batches reach a librdkafka consumer and the SDK decoder."""
    with WireConnection(server.bootstrap) as conn:
        end = conn.end_offset(TOPIC, 0)
        result = conn.produce(TOPIC, 0, poisoned_batch([b"vv", b"second", b"third"], codec))
        assert result.error_code == ErrorCode.INVALID_RECORD, result
        assert [e.batch_index for e in result.record_errors] == [0]
        assert "record 0: its length is 11" in (result.error_message or "")
        assert conn.end_offset(TOPIC, 0) == end, "a batch with malformed records was stored"
        good = [f"after-poison-{codec}-{i}".encode() for i in range(3)]
        result = conn.produce(TOPIC, 0, values_batch(good, compression=codec))
        assert (result.error_code, result.base_offset) == (0, end)
        assert batch_values(conn.read_all(TOPIC, 0, end)) == good
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"after-poison-{codec}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, 0, end)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < len(good) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
        assert got == good
    finally:
        consumer.close()


def test_produce_to_internal_topics_is_refused(server: ServerProcess, unaffected: None) -> None:
    """Finding 2 of issue 17: clients cannot append to __consumer_offsets (or
    __transaction_state), as in Kafka; the coordinator's own writes still work."""
    group = "internal-topic-test"
    with WireConnection(server.bootstrap) as conn:
        wait_until(lambda: conn.find_coordinator(group).error_code == 0, timeout=30,
                   what="a group coordinator (it creates __consumer_offsets)")
        wait_until(lambda: conn.commit_offsets(group, TOPIC, {0: 1}) == {0: 0}, timeout=30,
                   what="a first offset commit")
        assert conn.fetch_offsets(group, TOPIC, [0]).topics[0].partitions[0].committed_offset == 1
        for partition in range(3):
            end = conn.end_offset("__consumer_offsets", partition)
            result = conn.produce("__consumer_offsets", partition, values_batch([b"not a group record"]))
            assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, result
            assert "internal topic" in (result.error_message or "")
            assert conn.end_offset("__consumer_offsets", partition) == end
        # Refused by name even though it does not exist (Kafka checks before the lookup).
        result = conn.produce("__transaction_state", 0, values_batch([b"x"]))
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        # The coordinator appends to its partition directly, not through Produce.
        assert conn.commit_offsets(group, TOPIC, {0: 7}) == {0: 0}
        assert conn.fetch_offsets(group, TOPIC, [0]).topics[0].partitions[0].committed_offset == 7


def test_batch_length_lying_about_its_size(server: ServerProcess, unaffected: None) -> None:
    batch = bytearray(values_batch([b"v"] * 4))
    batch[8:12] = struct.pack(">i", len(batch) * 10)  # batchLength beyond the records field
    with WireConnection(server.bootstrap) as conn:
        end = conn.end_offset(TOPIC, 0)
        result = conn.produce(TOPIC, 0, bytes(batch))
        assert result.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        assert conn.end_offset(TOPIC, 0) == end


def test_batch_over_max_message_bytes(server: ServerProcess, unaffected: None) -> None:
    rng = random.Random(5)
    big = encode_batch([Record(key=None, value=rng.randbytes(MAX_MESSAGE_BYTES))])
    assert MAX_MESSAGE_BYTES < len(big) < MAX_REQUEST_BYTES
    with WireConnection(server.bootstrap) as conn:
        end = conn.end_offset(TOPIC, 0)
        result = conn.produce(TOPIC, 0, big)
        assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert str(MAX_MESSAGE_BYTES) in (result.error_message or "")
        assert conn.end_offset(TOPIC, 0) == end
        # Just under the limit is fine, on the same connection.
        fits = encode_batch([Record(key=None, value=rng.randbytes(MAX_MESSAGE_BYTES - 200))])
        assert len(fits) <= MAX_MESSAGE_BYTES
        result = conn.produce(TOPIC, 0, fits)
        assert (result.error_code, result.base_offset) == (0, end)


def test_produce_to_unknown_topic_or_partition(server: ServerProcess, unaffected: None) -> None:
    with WireConnection(server.bootstrap) as conn:
        assert conn.produce("no-such-topic", 0, values_batch([b"x"])).error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert conn.produce(TOPIC, 2, values_batch([b"x"])).error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_pipelined_requests_answered_in_order_then_garbage(server: ServerProcess,
                                                           unaffected: None) -> None:
    """Good requests pipelined ahead of garbage are all answered before the close (as in Kafka,
    which reads a connection's next request only after answering the previous one)."""
    with WireConnection(server.bootstrap) as conn:
        requests = b"".join(encode_request(ApiKey.API_VERSIONS, 2, cid, {}, client_id="p")
                            for cid in range(1, 6))
        conn.send_bytes(requests + frame(b"\x00\x12garbage"))
        for cid in range(1, 6):
            header, response = decode_response(ApiKey.API_VERSIONS, 2, conn.read_frame())
            assert header.correlation_id == cid and response.error_code == 0
        with pytest.raises(ConnectionClosedByBroker):
            conn.read_frame()
