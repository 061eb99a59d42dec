"""The sendfile path of Fetch responses (broker/net/zero_copy.py): the bytes on the
wire equal the read path's bytes, whatever the socket buffers, and a client
that goes away mid-transfer costs nobody else anything.

Two levels: `send_response` over a real socket pair with real segment files
(in-process, so the send buffer can be made tiny), and a real broker process
serving real clients that read slowly or hang up.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from pathlib import Path

import pytest
import trio

from raftka.broker.net.zero_copy import (
    SENDFILE_MIN_BYTES,
    ChunkedResponse,
    FileRegion,
    send_response,
)
from raftka.client.protocol import ApiKey, FetchResponse, decode_response, encode_request
from raftka.client.protocol.messages import encode_response, encode_response_chunks
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch, iter_batches
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection

SMALL_BUFFER = 4096


def random_batch(rng: random.Random, records: int, size: int) -> bytes:
    return encode_batch([Record(key=None, value=rng.randbytes(size)) for _ in range(records)])


@pytest.fixture
def plog(tmp_path: Path):
    """~1.5 MB in 64 KiB segments, so reads span several segment files."""
    rng = random.Random(9)
    log = PartitionLog.open(tmp_path, "zc", 0, LogConfig(segment_bytes=64 * 1024), now_ms=0)
    try:
        for _ in range(150):
            log.append(random_batch(rng, 10, rng.randrange(200, 1800)), 0, now_ms=0)
        assert len(list(tmp_path.glob("zc-0/*.log"))) > 5
        yield log
    finally:
        log.close()


def tiny_socket_pair() -> tuple[trio.SocketStream, trio.socket.SocketType]:
    a, b = trio.socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    return trio.SocketStream(a), b


async def send_and_receive(response: ChunkedResponse, expected_size: int,
                           read_size: int = 1000) -> bytes:
    """Send through a socket pair with tiny buffers while the peer reads slowly."""
    stream, peer = tiny_socket_pair()
    received = bytearray()
    async with stream:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_response, stream, response)
            while len(received) < expected_size:
                chunk = await peer.recv(read_size)
                assert chunk, f"the sender closed after {len(received)} of {expected_size} bytes"
                received += chunk
                await trio.lowlevel.checkpoint()
    peer.close()
    return bytes(received)


@pytest.mark.parametrize(("offset", "max_bytes"), [
    (0, 10 << 20),          # everything: every segment, a partial send per buffer-full
    (333, 300_000),         # a middle range crossing segment boundaries
    (1490, 10 << 20),       # the last batch only: small, read and coalesced
])
async def test_sendfile_bytes_equal_the_read_path(plog: PartitionLog, offset: int, max_bytes: int):
    info = plog.read(offset, max_bytes)
    expected = plog.read_bytes(offset, max_bytes)
    assert info.size == len(expected) > 0
    if max_bytes > 1 << 20:
        assert len(info.slices) > 1 or info.size < SENDFILE_MIN_BYTES
    response = ChunkedResponse([b"head", FileRegion(info.slices), b"-", FileRegion(info.slices),
                                b"tail"])
    total = 4 + 2 * info.size + 1 + 4
    got = await send_and_receive(response, total)
    assert got == b"head" + expected + b"-" + expected + b"tail"


async def test_chunked_fetch_frame_equals_the_copied_frame(plog: PartitionLog):
    """The whole response frame, encoded with a FileRegion, is byte for byte the
    frame encoded with the region's bytes copied in."""
    info = plog.read(100, 400_000)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "zc", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 1500,
             "last_stable_offset": 1500, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": FileRegion(info.slices)}]}]}
    chunks = encode_response_chunks(7, ApiKey.FETCH, 11, FetchResponse(**body))
    body["responses"][0]["partitions"][0]["records"] = info.read_bytes()
    copied = encode_response(7, ApiKey.FETCH, 11, FetchResponse(**body))
    assert await send_and_receive(ChunkedResponse(chunks), len(copied)) == copied


async def test_a_peer_closing_mid_transfer_is_a_broken_stream(plog: PartitionLog):
    info = plog.read(0, 10 << 20)
    stream, peer = tiny_socket_pair()

    async def hang_up() -> None:
        assert len(await peer.recv(SMALL_BUFFER)) > 0
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()  # a reset, with the sender blocked on a full buffer

    async with stream, trio.open_nursery() as nursery:
        nursery.start_soon(hang_up)
        # The kind of error serve_connection treats as "the client went away".
        with pytest.raises(trio.BrokenResourceError):
            await send_response(stream, ChunkedResponse([FileRegion(info.slices)]))
    # The segment files are untouched: the next reader gets everything.
    got = await send_and_receive(ChunkedResponse([FileRegion(info.slices)]), info.size)
    assert got == plog.read_bytes(0, 10 << 20)


# --- a real broker -------------------------------------------------------------------
TOPIC = "zc"


@pytest.fixture(scope="module")
def loaded_server(tmp_path_factory):
    """A broker with ~3 MB of incompressible records in one partition."""
    with running_server(tmp_path_factory.mktemp("zero-copy")) as server:
        rng = random.Random(1)
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 1) == 0
            for _ in range(48):
                assert conn.produce(TOPIC, 0, random_batch(rng, 64, 1000)).error_code == 0
        yield server


def segment_bytes(server, length: int) -> bytes:
    with open(server.directory / "data" / f"{TOPIC}-0" / "00000000000000000000.log", "rb") as f:
        return f.read(length)


def raw_fetch_connection(server, rcvbuf: int | None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect, so the window is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    host, port = server.bootstrap.rsplit(":", 1)
    sock.settimeout(30)
    sock.connect((host, int(port)))
    return sock


def fetch_all_body(max_bytes: int = 50 << 20) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 10 << 20}]}]}


def read_exactly(sock: socket.socket, n: int, piece: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(piece, n - len(out)))
        assert chunk, f"the broker closed after {len(out)} of {n} bytes"
        out += chunk
    return bytes(out)


def slow_fetch(server, rcvbuf: int | None, piece: int):
    with raw_fetch_connection(server, rcvbuf) as sock:
        sock.sendall(encode_request(ApiKey.FETCH, 11, 1, fetch_all_body(), client_id="zc"))
        (size,) = struct.unpack(">i", read_exactly(sock, 4, 4))
        frame = read_exactly(sock, size, piece)
    _, response = decode_response(ApiKey.FETCH, 11, frame)
    return response.responses[0].partitions[0]


def test_a_slow_reader_with_a_tiny_window_gets_the_segment_bytes(loaded_server):
    result = slow_fetch(loaded_server, rcvbuf=SMALL_BUFFER, piece=1500)
    records = bytes(result.records)
    assert result.error_code == 0 and len(records) > 2_000_000
    assert records == segment_bytes(loaded_server, len(records))
    assert sum(b.header.record_count for b in iter_batches(records)) == 48 * 64


def test_clients_hanging_up_mid_transfer_do_not_disturb_others(loaded_server):
    expected = bytes(slow_fetch(loaded_server, rcvbuf=None, piece=1 << 20).records)
    request = encode_request(ApiKey.FETCH, 11, 1, fetch_all_body(), client_id="zc-quitter")
    quitters = []
    for _ in range(6):
        sock = raw_fetch_connection(loaded_server, SMALL_BUFFER)
        sock.sendall(request)
        assert len(read_exactly(sock, 100, 100)) == 100  # the transfer has begun
        quitters.append(sock)
    for i, sock in enumerate(quitters):
        if i % 2:  # a reset; the others close normally with unread data (also a reset)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    # Another client, meanwhile and after, gets every byte.
    for _ in range(2):
        assert bytes(slow_fetch(loaded_server, rcvbuf=SMALL_BUFFER, piece=65536).records) == expected
    assert loaded_server.running()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the broker has noticed each hang-up...
        closed = os.popen(f"ss -tn state established '( sport = :{loaded_server.client_port} )'"
                          ).read().count("\n") - 1
        if closed <= 0:
            break
        time.sleep(0.05)
    # ...and treated it as a client going away, not as an error.
    log = loaded_server.log_path.read_text(errors="replace")
    assert "internal_error" not in log and "Traceback" not in log
