"""The fault proxies on real loopback sockets: forwarding, source identification, cut and black-hole."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from raftka.chaos.proxy import ProxyNet, Route
from tests.support import free_port


@pytest.fixture
def echo():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        try:
            while data := conn.recv(4096):
                conn.sendall(data)
        except OSError:
            pass


@pytest.fixture
def net(echo):
    mapping: dict[int, int] = {}
    proxies = ProxyNet(lambda: dict(mapping))
    port = free_port()
    proxies.add(Route("n2.data", 2, "data", ("127.0.0.1", port), ("127.0.0.1", echo)))
    proxies.start()
    try:
        yield proxies, port, mapping
    finally:
        proxies.heal()
        proxies.stop()


def _roundtrip(port: int, payload: bytes = b"ping", timeout: float = 5.0) -> bytes:
    """What came back; b"" when the proxy closed or reset the link."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(payload)
            return s.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return b""


def test_forwards_and_lets_unblocked_sources_through(net):
    proxies, port, mapping = net
    assert _roundtrip(port) == b"ping"
    mapping[os.getpid()] = 1  # this process now counts as node 1
    proxies.partition({frozenset((3, 2))})  # another pair: we are not affected
    assert _roundtrip(port) == b"ping"


def test_cut_closes_existing_links_and_refuses_new_ones_until_heal(net):
    proxies, port, mapping = net
    mapping[os.getpid()] = 1
    live = socket.create_connection(("127.0.0.1", port), timeout=5)
    live.sendall(b"a")
    assert live.recv(10) == b"a"
    proxies.partition({frozenset((1, 2))}, mode="cut")
    try:
        assert live.recv(10) == b""  # closed by the proxy
    except ConnectionResetError:
        pass
    live.close()
    assert _roundtrip(port) == b""  # accepted, then closed at once
    proxies.heal()
    assert _roundtrip(port) == b"ping"


def test_unknown_processes_count_as_clients(net):
    proxies, port, _ = net
    proxies.partition({frozenset(("client", 2))}, mode="cut")
    assert _roundtrip(port) == b""
    proxies.partition({frozenset(("client", 2))}, mode="cut", kinds=frozenset({"raft"}))  # other route kind
    assert _roundtrip(port) == b"ping"


def test_blackhole_stalls_then_delivers_after_heal(net):
    proxies, port, mapping = net
    mapping[os.getpid()] = 1
    proxies.partition({frozenset((1, 2))}, mode="blackhole")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"held")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(10)
        proxies.heal()
        s.settimeout(5)
        assert s.recv(10) == b"held"
