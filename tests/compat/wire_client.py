"""A blocking, one-socket Kafka wire client for tests that need exact bytes on the wire.

Built on raftka's sans-IO codec (`client.protocol`) and batch encoder
(`log.record_batch`): the tests choose every version, field and byte, and can
send things no real client would (garbage, truncated frames, corrupt batches).
"""

from __future__ import annotations

import itertools
import select
import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from raftka.client.protocol import ApiKey, FrameDecoder, decode_response, encode_request
from raftka.log.record_batch import DecodedBatch, Record, encode_batch, iter_batches

EARLIEST = -2
LATEST = -1


class ConnectionClosedByBroker(Exception):
    """The broker closed the connection while a response was expected."""


class WireConnection:
    """One TCP connection to a broker; requests are answered in order, so one at a time here."""

    def __init__(self, address: str, *, timeout: float = 15.0, client_id: str = "wire-test",
                 source_host: str | None = None) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=None if source_host is None else (source_host, 0))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.client_id = client_id
        self._decoder = FrameDecoder(max_frame_size=1 << 30)
        self._frames: list[bytes] = []
        self._correlation = itertools.count(1)

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # -- bytes -------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame; ConnectionClosedByBroker if the broker closes first."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._frames:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response frame within {timeout or self.timeout}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionClosedByBroker("the broker closed the connection")
            self._frames.extend(self._decoder.feed(chunk))
        return self._frames.pop(0)

    def response_pending(self, within: float) -> bool:
        """True if response bytes (or EOF) arrive within `within` seconds."""
        if self._frames:
            return True
        readable, _, _ = select.select([self.sock], [], [], within)
        return bool(readable)

    def wait_closed_by_broker(self, timeout: float = 10.0) -> bytes:
        """Read until the broker closes the connection; return whatever it sent before closing.

        Raises AssertionError if it is still open after `timeout` seconds.
        """
        received = b""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"the broker kept the connection open for {timeout}s "
                    f"(received {len(received)} bytes), expected it to close it")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk

    # -- requests ----------------------------------------------------------------

    def send_request(self, api_key: int, version: int, body: Any) -> int:
        correlation_id = next(self._correlation)
        self.send_bytes(encode_request(api_key, version, correlation_id, body,
                                       client_id=self.client_id))
        return correlation_id

    def receive_response(self, api_key: int, version: int, correlation_id: int,
                         timeout: float | None = None) -> Any:
        header, response = decode_response(api_key, version, self.read_frame(timeout))
        if header.correlation_id != correlation_id:
            raise AssertionError(f"response correlation id {header.correlation_id}, "
                                 f"expected {correlation_id}")
        return response

    def request(self, api_key: int, version: int, body: Any, timeout: float | None = None) -> Any:
        correlation_id = self.send_request(api_key, version, body)
        return self.receive_response(api_key, version, correlation_id, timeout)

    # -- the requests the tests use ------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
                     ) -> int:
        """Create a topic; the error code (0 on success)."""
        response = self.request(ApiKey.CREATE_TOPICS, 4, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 15000, "validate_only": False})
        return response.topics[0].error_code

    def produce(self, topic: str, partition: int, records: bytes, *, acks: int = -1,
                version: int = 8, timeout_ms: int = 15000) -> Any:
        """One partition's produce result (`error_code`, `base_offset`, ...)."""
        response = self.request(ApiKey.PRODUCE, version, {
            "transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]})
        return response.responses[0].partition_responses[0]

    def fetch_request_body(self, topic: str, partition: int, offset: int, *,
                           max_wait_ms: int = 0, min_bytes: int = 1,
                           max_bytes: int = 50 << 20, partition_max_bytes: int = 10 << 20
                           ) -> dict:
        return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
                "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                     "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}]}]}

    def fetch(self, topic: str, partition: int, offset: int, **options: int) -> Any:
        """One partition's fetch result (`error_code`, `high_watermark`, `records`, ...)."""
        response = self.request(ApiKey.FETCH, 11,
                                self.fetch_request_body(topic, partition, offset, **options),
                                timeout=self.timeout + options.get("max_wait_ms", 0) / 1000)
        return response.responses[0].partitions[0]

    def list_offset(self, topic: str, partition: int, timestamp: int = LATEST) -> Any:
        """One partition's ListOffsets result (`error_code`, `offset`, `timestamp`): v5, or the
        version that introduced a special timestamp (-3 max timestamp v7, -4 earliest local v8,
        -5 latest tiered v9, -6 earliest pending upload v11), as Kafka's clients pick it."""
        version = {-3: 7, -4: 8, -5: 9, -6: 11}.get(timestamp, 5)
        response = self.request(ApiKey.LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1,
                 "timestamp": timestamp}]}]})
        return response.topics[0].partitions[0]

    def end_offset(self, topic: str, partition: int) -> int:
        result = self.list_offset(topic, partition, LATEST)
        assert result.error_code == 0, f"ListOffsets {topic}-{partition}: error {result.error_code}"
        return result.offset

    def init_producer_id(self) -> tuple[int, int]:
        response = self.request(ApiKey.INIT_PRODUCER_ID, 1,
                                {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert response.error_code == 0, f"InitProducerId: error {response.error_code}"
        return response.producer_id, response.producer_epoch

    def find_coordinator(self, group: str) -> Any:
        """FindCoordinator v2 for a group (the first one creates `__consumer_offsets`)."""
        return self.request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> dict[int, int]:
        """OffsetCommit v7 outside any generation (a standalone consumer's commit):
        partition -> error code."""
        response = self.request(ApiKey.OFFSET_COMMIT, 7, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": None} for p, o in offsets.items()]}]})
        return {p.partition_index: p.error_code for p in response.topics[0].partitions}

    def fetch_offsets(self, group: str, topic: str, partitions: Iterable[int]) -> Any:
        """OffsetFetch v5: the response (`error_code`, `topics[0].partitions`)."""
        return self.request(ApiKey.OFFSET_FETCH, 5, {
            "group_id": group, "topics": [{"name": topic, "partition_indexes": list(partitions)}]})

    def read_all(self, topic: str, partition: int, start: int = 0) -> list[DecodedBatch]:
        """Every batch from `start` up to the current end (high watermark)."""
        end = self.end_offset(topic, partition)
        batches: list[DecodedBatch] = []
        offset = start
        while offset < end:
            result = self.fetch(topic, partition, offset)
            assert result.error_code == 0, f"fetch {topic}-{partition}@{offset}: error {result.error_code}"
            fetched = list(iter_batches(bytes(result.records)))
            assert fetched, f"fetch {topic}-{partition}@{offset} returned no batch below end {end}"
            batches.extend(fetched)
            offset = fetched[-1].header.last_offset + 1
        return batches


def values_batch(values: Iterable[bytes], *, compression: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A RecordBatch of keyless records with these values."""
    return encode_batch([Record(key=None, value=v) for v in values], compression=compression,
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence)


def batch_values(batches: Sequence[DecodedBatch]) -> list[bytes | None]:
    return [r.value for b in batches for r in b.records]
