"""Kafka listener limits on real sockets against a real raftka server process.

connections.max.idle.ms (idle and slowloris connections), max.connections.per.ip
(+ overrides), max.connections, queued.max.request.bytes, socket.request.max.bytes
before buffering, and EMFILE on accept. The kernel's own view of a socket
(/proc/net/tcp: bytes received but not read by the broker) shows backpressure
without timing.
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from raftka.client.protocol import ApiKey, encode_request
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import ConnectionClosedByBroker, WireConnection
from tests.support import wait_until


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def unread_bytes(server_port: int, client: socket.socket) -> int | None:
    """Bytes the kernel holds for the broker's end of `client`'s connection, not yet read by the
    broker (rx_queue in /proc/net/tcp); None if that socket is not (or no longer) there."""
    client_ip, client_port = client.getsockname()[:2]

    def hex_address(ip: str, port: int) -> str:
        return f"{struct.unpack('<I', socket.inet_aton(ip))[0]:08X}:{port:04X}"

    local, remote = hex_address(client.getpeername()[0], server_port), hex_address(client_ip, client_port)
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[1] == local and fields[2] == remote:
                return int(fields[4].split(":")[1], 16)
    return None


def connect(server: ServerProcess, source_ip: str | None = None) -> socket.socket:
    host, port = server.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=15,
                                    source_address=(source_ip, 0) if source_ip else None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def wire(server: ServerProcess, source_ip: str | None = None) -> WireConnection:
    """A WireConnection from `source_ip` (any 127.x address is loopback on Linux)."""
    conn = WireConnection.__new__(WireConnection)
    sock = connect(server, source_ip)
    WireConnection.__init__(conn, server.bootstrap)  # builds the decoder; replace its socket
    conn.sock.close()
    conn.sock = sock
    return conn


def api_versions(correlation_id: int = 1) -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 2, correlation_id, {}, client_id="limits")


def served(conn: WireConnection) -> bool:
    """True if the broker answers an ApiVersions request on `conn`."""
    try:
        return conn.request(ApiKey.API_VERSIONS, 2, {}, timeout=10).error_code == 0
    except ConnectionClosedByBroker:
        return False


def closed_by_broker(sock: socket.socket) -> bool:
    """Non-blocking: has the broker closed `sock` (EOF or reset)?"""
    sock.setblocking(False)
    try:
        return sock.recv(65536) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.settimeout(15)


def big_metadata_request(size: int, correlation_id: int = 9) -> bytes:
    """A valid Metadata v8 request frame of about `size` bytes (unknown topic names)."""
    count = size // 210
    return encode_request(ApiKey.METADATA, 8, correlation_id, {
        "topics": [{"name": f"t{i:07d}-" + "n" * 200} for i in range(count)],
        "allow_auto_topic_creation": False}, client_id="big")


# -- connections.max.idle.ms ---------------------------------------------------------

IDLE_MS = 1500


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("idle"),
                        properties={"connections.max.idle.ms": str(IDLE_MS)}) as server:
        yield server


def test_idle_connection_is_closed(idle_server: ServerProcess) -> None:
    before = len(idle_server.log_events("connection.closed"))
    with WireConnection(idle_server.bootstrap) as conn:
        assert served(conn)
        assert conn.wait_closed_by_broker(timeout=30) == b""
    events = wait_until(lambda: [e for e in idle_server.log_events("connection.closed")[before:]
                                 if e["reason"] == "idle"], what="a connection.closed reason=idle event")
    assert events[0]["connections_max_idle_ms"] == IDLE_MS


def test_a_connection_in_use_stays_open(idle_server: ServerProcess) -> None:
    """Every request (and its response) restarts the idle clock."""
    with WireConnection(idle_server.bootstrap) as conn:
        end = time.monotonic() + 4 * IDLE_MS / 1000
        while time.monotonic() < end:
            assert served(conn), "closed while requests kept coming"
            time.sleep(IDLE_MS / 1000 / 6)  # the client's pace, far below the idle limit


def test_slowloris_partial_request_is_closed(idle_server: ServerProcess) -> None:
    """A request that never completes is idle, however steadily its bytes trickle in."""
    request = api_versions()
    partial = struct.pack(">i", 100_000) + request[4:]  # claims far more than will ever come
    with connect(idle_server) as sock:
        sock.sendall(partial)
        deadline = time.monotonic() + 30
        trickled = 0
        while not closed_by_broker(sock):
            assert time.monotonic() < deadline, \
                f"a request trickling in ({trickled} bytes so far) kept its connection open for 30 s"
            try:
                sock.send(b"\x00")
            except (BrokenPipeError, ConnectionResetError):
                break
            trickled += 1
            time.sleep(IDLE_MS / 1000 / 10)  # the attacker's pace: well inside the idle limit
    assert trickled >= 5, "the connection closed before the trickle started"


def test_2000_idle_connections_do_not_stay_open(idle_server: ServerProcess) -> None:
    rss_before = rss_bytes(idle_server.pid)
    with ExitStack() as stack, selectors.DefaultSelector() as selector:
        for _ in range(2000):
            sock = stack.enter_context(connect(idle_server))
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        open_sockets = 2000
        deadline = time.monotonic() + 60
        while open_sockets:
            assert time.monotonic() < deadline, f"{open_sockets} of 2000 idle connections still open after 60 s"
            for key, _ in selector.select(timeout=1):
                try:
                    data = key.fileobj.recv(16)
                except ConnectionResetError:
                    data = b""
                assert data == b"", "the broker sent bytes on a connection that sent nothing"
                selector.unregister(key.fileobj)
                open_sockets -= 1
    # Closed and forgotten: the broker serves, and did not keep per-connection memory.
    with WireConnection(idle_server.bootstrap) as conn:
        assert served(conn)
    assert rss_bytes(idle_server.pid) - rss_before < 64 << 20


# -- max.connections.per.ip ------------------------------------------------------------

@pytest.fixture(scope="module")
def quota_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    properties = {"max.connections.per.ip": "3",
                  "max.connections.per.ip.overrides": "127.0.0.1:1000,127.0.0.3:5"}
    with running_server(tmp_path_factory.mktemp("quota"), properties=properties) as server:
        yield server


@pytest.mark.parametrize(("source_ip", "limit"), [("127.0.0.2", 3), ("127.0.0.3", 5)])
def test_connections_over_the_per_ip_limit_are_closed_at_once(quota_server: ServerProcess,
                                                                source_ip: str, limit: int) -> None:
    before = len(quota_server.log_events("connection.rejected"))
    with ExitStack() as stack:
        admitted = [stack.enter_context(wire(quota_server, source_ip)) for _ in range(limit)]
        assert all(served(conn) for conn in admitted)
        with wire(quota_server, source_ip) as over:
            over.send_bytes(api_versions())
            assert over.wait_closed_by_broker() == b"", "the connection over the limit was answered"
        # Another address is unaffected by this one's count.
        with WireConnection(quota_server.bootstrap) as other:
            assert served(other)
        # A closed connection frees its slot.
        admitted.pop().close()

        def replacement_served() -> bool:
            with wire(quota_server, source_ip) as conn:
                return served(conn)

        wait_until(replacement_served, what=f"a new connection from {source_ip} after one closed")
    events = wait_until(lambda: quota_server.log_events("connection.rejected")[before:],
                        what="a connection.rejected event")
    assert (events[0]["peer"], events[0]["limit"], events[0]["reason"]) == \
        (source_ip, limit, "max.connections.per.ip")


# -- max.connections -------------------------------------------------------------------

def test_max_connections_stops_accepting_until_a_slot_frees(tmp_path) -> None:
    with running_server(tmp_path, properties={"max.connections": "4"}) as server, ExitStack() as stack:
        before = len(server.log_events("listener.connection_limit_reached"))
        admitted = [stack.enter_context(WireConnection(server.bootstrap)) for _ in range(4)]
        assert all(served(conn) for conn in admitted)
        wait_until(lambda: server.log_events("listener.connection_limit_reached")[before:],
                   what="a listener.connection_limit_reached event")
        waiting = stack.enter_context(WireConnection(server.bootstrap))  # in the kernel's backlog
        waiting.send_bytes(api_versions(5))
        assert not waiting.response_pending(0.5), "a connection over max.connections was served"
        assert unread_bytes(server.client_port, waiting.sock) == len(api_versions(5)), "it was read"
        admitted.pop().close()
        assert waiting.receive_response(ApiKey.API_VERSIONS, 2, 5).error_code == 0
        wait_until(lambda: server.log_events("listener.accepting_again"),
                   what="a listener.accepting_again event")


# -- queued.max.request.bytes and socket.request.max.bytes -----------------------------

QUEUED_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    properties = {"queued.max.request.bytes": str(QUEUED_BYTES),
                  "socket.request.max.bytes": str(8 << 20)}
    with running_server(tmp_path_factory.mktemp("memory"), properties=properties) as server:
        yield server


def test_spent_request_memory_stops_reading_until_released(memory_server: ServerProcess) -> None:
    port = memory_server.client_port
    big = big_metadata_request(1 << 20)
    half = len(big) // 2
    with WireConnection(memory_server.bootstrap) as first, \
            WireConnection(memory_server.bootstrap) as small, \
            WireConnection(memory_server.bootstrap) as second:
        # The first request in progress may always be read, past the budget (it can finish).
        first.send_bytes(big[:half])
        wait_until(lambda: unread_bytes(port, first.sock) == 0, what="the broker to read half a request")
        before = len(memory_server.log_events("request_memory.exhausted"))
        # Now the budget is spent: neither a small request nor another big one is read at all.
        small.send_bytes(api_versions(3))
        second.send_bytes(big[:half])
        wait_until(lambda: memory_server.log_events("request_memory.exhausted")[before:],
                   what="a request_memory.exhausted event")
        assert unread_bytes(port, small.sock) == len(api_versions(3))
        assert unread_bytes(port, second.sock) > QUEUED_BYTES
        assert not small.response_pending(0.2)
        # The first request completes and is answered; its memory goes to the others (in an
        # order of the scheduler's choosing: the second big request may take the budget first).
        first.send_bytes(big[half:])
        assert first.receive_response(ApiKey.METADATA, 8, 9).topics
        second.send_bytes(big[half:])
        assert second.receive_response(ApiKey.METADATA, 8, 9).topics
        assert small.receive_response(ApiKey.API_VERSIONS, 2, 3).error_code == 0


def test_a_huge_size_prefix_is_refused_before_buffering(memory_server: ServerProcess) -> None:
    rss_before = rss_bytes(memory_server.pid)
    before = len(memory_server.log_events("connection.closed"))
    for _ in range(20):
        with connect(memory_server) as sock:
            sock.sendall(struct.pack(">i", 2**31 - 1))  # 2 GiB claimed, nothing else sent
            sock.settimeout(15)
            assert sock.recv(16) == b""
    # A request under the limit that never comes holds no memory either.
    with ExitStack() as stack:
        for _ in range(50):
            sock = stack.enter_context(connect(memory_server))
            sock.sendall(struct.pack(">i", (8 << 20) - 1) + b"\x00" * 1000)
        assert rss_bytes(memory_server.pid) - rss_before < 16 << 20
    wait_until(lambda: sum(e["reason"] == "request_too_large"
                           for e in memory_server.log_events("connection.closed")[before:]) == 20,
               what="20 connection.closed reason=request_too_large events")
    with WireConnection(memory_server.bootstrap) as conn:
        assert served(conn)


# -- EMFILE on accept ------------------------------------------------------------------

def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_accept_survives_running_out_of_file_descriptors(tmp_path) -> None:
    topic = "after-emfile"
    with running_server(tmp_path, properties={"offsets.topic.num.partitions": "1"}) as server:
        with WireConnection(server.bootstrap) as conn:
            # Every file is open before the squeeze: the topic's, and the group coordinator's.
            assert conn.create_topic(topic) == 0
            wait_until(lambda: conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
                       .error_code == 0, what="the group coordinator")
        pid = server.pid
        _, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        headroom = 10
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds(pid) + headroom, hard))
        with ExitStack() as stack:
            # More connections than descriptors left: the kernel completes them, accept() fails.
            for _ in range(headroom + 20):
                stack.enter_context(connect(server))
            # The listener backs off (100 ms doubling), and the broker's other periodic file
            # work (the high-watermark checkpoint, every 5 s) fails without ending the broker.
            failures = wait_until(lambda: [e for e in server.log_events("listener.accept_failed")
                                           if e["failures"] >= 4], timeout=15,
                                  what="four listener.accept_failed events")
            assert failures[0]["errno"] in ("EMFILE", "ENFILE"), failures[0]
            # 100 ms, doubling per consecutive failure, at most 1 s
            backoffs = {(e["failures"], e["retry_in_ms"]) for e in server.log_events("listener.accept_failed")}
            assert all(delay == min(1000, 100 * 2 ** (n - 1)) for n, delay in backoffs), sorted(backoffs)
            wait_until(lambda: server.log_events("hw_checkpoint.write_failed"), timeout=15,
                       what="a failed high-watermark checkpoint")
            assert server.running()
        # Descriptors are free again: the listener accepts and serves, on the same limit.
        wait_until(lambda: server.log_events("listener.accept_recovered"), timeout=15,
                   what="a listener.accept_recovered event")
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        producer.produce(topic, b"still serving")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            message = wait_until(lambda: consumer.poll(1), timeout=30, what="the message back")
            assert message.error() is None and message.value() == b"still serving"
        finally:
            consumer.close()
        assert server.running()
        # No error-level structlog event, and no stdlib ERROR from the accept path (trio's own
        # serve_listeners logged one with a traceback every 100 ms). pysyncobj's tick, which
        # cannot write its journal metadata meanwhile, logs "ERROR:pysyncobj...": the quorum's.
        errors = [line for line in server.log_path.read_text().splitlines()
                  if '"level": "error"' in line or line.startswith("ERROR:trio")]
        assert not errors, errors[:3]
