"""BrokerConnection against scripted brokers on real loopback sockets.

The scripted broker speaks the wire codec but behaves as each test needs
(an old broker that rejects ApiVersions v2, one that answers late, one that
hangs up), cases a healthy raftka server never produces.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import pytest
import trio

from raftka.client.connection import BrokerConnection
from raftka.client.errors import KafkaConnectionError, KafkaTimeoutError
from raftka.client.protocol import (
    ADVERTISED_VERSIONS,
    ApiKey,
    FrameDecoder,
    MetadataRequest,
    api_versions_fallback_response,
    decode_request,
    encode_response,
    peek_request_header,
)

Handler = Callable[[trio.SocketStream, list[tuple]], Awaitable[None]]


def api_versions_body(ranges=ADVERTISED_VERSIONS) -> dict:
    return {"error_code": 0, "api_keys": [
        {"api_key": int(k), "min_version": lo, "max_version": hi}
        for k, (lo, hi) in ranges.items()]}


async def read_requests(stream: trio.SocketStream):
    decoder = FrameDecoder()
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        for frame in decoder.feed(chunk):
            yield frame


async def serve(nursery: trio.Nursery, handler: Handler) -> tuple[int, list[tuple]]:
    seen: list[tuple] = []

    async def on_connection(stream: trio.SocketStream) -> None:
        try:
            await handler(stream, seen)
        except trio.BrokenResourceError:
            pass

    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, on_connection, 0, host="127.0.0.1"))
    return listeners[0].socket.getsockname()[1], seen


async def old_broker(stream: trio.SocketStream, seen: list[tuple]) -> None:
    """Knows ApiVersions v0 only; answers metadata in request order."""
    async for frame in read_requests(stream):
        header = peek_request_header(frame)
        seen.append((header.api_key, header.api_version))
        if header.api_key == ApiKey.API_VERSIONS and header.api_version > 0:
            await stream.send_all(api_versions_fallback_response(header.correlation_id))
            continue
        header, _ = decode_request(frame)
        if header.api_key == ApiKey.API_VERSIONS:
            ranges = {**ADVERTISED_VERSIONS, ApiKey.METADATA: (0, 5)}
            body = api_versions_body(ranges)
        else:
            body = {"brokers": [{"node_id": header.correlation_id, "host": "h", "port": 1}]}
        await stream.send_all(encode_response(header, header.api_key, header.api_version, body))


async def test_api_versions_falls_back_to_v0_and_picks_common_versions() -> None:
    async with trio.open_nursery() as nursery:
        port, seen = await serve(nursery, old_broker)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port)
        assert seen[:2] == [(ApiKey.API_VERSIONS, 2), (ApiKey.API_VERSIONS, 0)]
        assert conn.versions[ApiKey.METADATA] == 5
        assert conn.versions[ApiKey.PRODUCE] == 9  # the SDK's newest, which the broker advertises
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_pipelined_requests_get_their_own_responses() -> None:
    async with trio.open_nursery() as nursery:
        port, seen = await serve(nursery, old_broker)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port)
        results: dict[int, int] = {}

        async def ask(i: int) -> None:
            response = await conn.request(ApiKey.METADATA, MetadataRequest(topics=[]))
            results[i] = response.brokers[0].node_id  # the scripted broker echoes the cid

        async with trio.open_nursery() as inner:
            for i in range(20):
                inner.start_soon(ask, i)
        assert len(set(results.values())) == 20
        assert [k for k, _ in seen].count(ApiKey.METADATA) == 20
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_dropped_connection_fails_every_waiting_request() -> None:
    hang_up = trio.Event()

    async def flaky(stream: trio.SocketStream, seen: list[tuple]) -> None:
        async for frame in read_requests(stream):
            header = peek_request_header(frame)
            seen.append(header.api_key)
            if header.api_key == ApiKey.API_VERSIONS:
                await stream.send_all(encode_response(header, 18, header.api_version,
                                                      api_versions_body()))
            elif len(seen) == 4:  # three metadata requests are waiting
                await hang_up.wait()
                await stream.aclose()
                return

    async with trio.open_nursery() as nursery:
        port, _ = await serve(nursery, flaky)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port)
        errors: list[BaseException] = []

        async def ask() -> None:
            try:
                await conn.request(ApiKey.METADATA, MetadataRequest(topics=[]))
            except KafkaConnectionError as exc:
                errors.append(exc)

        async with trio.open_nursery() as inner:
            for _ in range(3):
                inner.start_soon(ask)
            with trio.fail_after(5):
                while conn.in_flight < 3:
                    await trio.sleep(0.01)
            hang_up.set()
        assert len(errors) == 3 and all("closed the connection" in str(e) for e in errors)
        assert conn.closed
        with pytest.raises(KafkaConnectionError, match="is closed"):
            await conn.request(ApiKey.METADATA, MetadataRequest(topics=[]))
        nursery.cancel_scope.cancel()


async def test_a_request_without_answer_times_out_and_a_late_answer_is_dropped() -> None:
    release = trio.Event()

    async def slow(stream: trio.SocketStream, seen: list[tuple]) -> None:
        async for frame in read_requests(stream):
            header, _ = decode_request(frame)
            if header.api_key == ApiKey.API_VERSIONS:
                body = api_versions_body()
            else:
                seen.append(header.correlation_id)
                if len(seen) == 1:
                    await release.wait()
                body = {"brokers": [{"node_id": header.correlation_id, "host": "h", "port": 1}]}
            await stream.send_all(encode_response(header, header.api_key, header.api_version,
                                                  body))

    async with trio.open_nursery() as nursery:
        port, seen = await serve(nursery, slow)
        conn = await BrokerConnection.connect(nursery, "127.0.0.1", port, request_timeout=0.2)
        with pytest.raises(KafkaTimeoutError, match="no response within 0.2s"):
            await conn.request(ApiKey.METADATA, MetadataRequest(topics=[]))
        release.set()
        response = await conn.request(ApiKey.METADATA, MetadataRequest(topics=[]), timeout=5)
        assert response.brokers[0].node_id == seen[1]  # not the abandoned one's answer
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_an_unreachable_broker_is_a_connection_error() -> None:
    from tests.support import free_port

    port = free_port()
    async with trio.open_nursery() as nursery:
        with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}"):
            await BrokerConnection.connect(nursery, "127.0.0.1", port)


async def test_producer_retries_a_leader_error_with_the_same_sequence() -> None:
    """NOT_LEADER_OR_FOLLOWER twice, then success: the producer refreshes metadata,
    resends the identical idempotent batch (same base sequence), and delivers."""
    from raftka.client.producer import AsyncProducer
    from raftka.log.batch_header import parse_header

    produced: list[tuple[int, int, int]] = []  # (producer_id, base_sequence, record_count)
    metadata_requests = 0
    port_box: list[int] = []

    async def fake(stream: trio.SocketStream, seen: list[tuple]) -> None:
        nonlocal metadata_requests
        async for frame in read_requests(stream):
            header, req = decode_request(frame)
            key = ApiKey(header.api_key)
            if key == ApiKey.API_VERSIONS:
                body = api_versions_body()
            elif key == ApiKey.METADATA:
                metadata_requests += 1
                body = {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port_box[0]}],
                        "controller_id": 1, "topics": [{"name": "t", "partitions": [
                            {"partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                             "replica_nodes": [1], "isr_nodes": [1]}]}]}
            elif key == ApiKey.INIT_PRODUCER_ID:
                body = {"producer_id": 42, "producer_epoch": 0}
            elif key == ApiKey.PRODUCE:
                batch = parse_header(bytes(req.topic_data[0].partition_data[0].records), 0)
                produced.append((batch.producer_id, batch.base_sequence, batch.record_count))
                error = 6 if len(produced) <= 2 else 0
                body = {"responses": [{"name": "t", "partition_responses": [
                    {"index": 0, "error_code": error, "base_offset": 0 if not error else -1}]}]}
            else:
                raise AssertionError(f"unexpected {key.name}")
            await stream.send_all(encode_response(header, header.api_key, header.api_version,
                                                  body))

    async with trio.open_nursery() as nursery:
        port, _ = await serve(nursery, fake)
        port_box.append(port)
        async with AsyncProducer(f"127.0.0.1:{port}", acks="all", enable_idempotence=True,
                                 retry_backoff_ms=10, linger_ms=0) as producer:
            metas = [producer.send_nowait("t", b"v%d" % i) for i in range(3)]
            await producer.flush()
        nursery.cancel_scope.cancel()
    assert [m.result().offset for m in metas] == [0, 1, 2]
    assert produced[0] == produced[1] == produced[2] == (42, 0, 3)
    assert metadata_requests >= 3  # start-up plus a refresh after each leader error
