"""The quorum port against peers that do not know the secret (raft_meta/quorum/quorum_transport.py).

Real voters (quorum_node.py processes, or open_quorum in this process when the test must
reach the listening socket itself), real sockets on 127.0.0.1. Each test failed against
pysyncobj's own transport: a claimed 2 GiB frame was buffered, idle and trickling
connections stayed open for ever, and the listener closed for good after an accept()
error or a hang-up.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import struct
import time
from pathlib import Path

import pytest
import trio

from raftka.raft_meta.metadata.records import Config
from raftka.raft_meta.quorum.quorum import QuorumError, QuorumSettings, open_quorum
from raftka.raft_meta.quorum.quorum_admin import query_voter
from raftka.testing.local_cluster import free_low_port
from tests.integration.quorum_procs import Voter, active_epoch, make_voters
from tests.support import wait_until

pytestmark = pytest.mark.timeout(120)

SECRET = "quorum-port-test-secret"
MiB = 1 << 20


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _open_fds(pid: int) -> list[int]:
    return [int(name) for name in os.listdir(f"/proc/{pid}/fd")]


def _acked(voter: Voter, prefix: str) -> list[str]:
    return [e["key"] for e in voter.drain() if e["event"] == "ack" and e["key"].startswith(prefix)]


def _commits(voter: Voter, prefix: str, count: int, timeout: float = 30) -> None:
    voter.send(f"submit {prefix} {count}")
    voter.wait_for(lambda _: len(_acked(voter, f"{prefix}-")) == count, timeout, f"{count} commits of {prefix}")


def _closed_by_peer(sock: socket.socket) -> bool:
    """True once the other side closed (EOF or reset); never blocks."""
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except ConnectionRefusedError:
        return False


@pytest.fixture
def one_voter(tmp_path: Path):
    (voter,) = make_voters(1, tmp_path, SECRET, extra_args=("--pre-auth-timeout", "1.0"))
    try:
        voter.start()
        voter.wait_for(lambda _: active_epoch(voter), 20, "the voter to lead")
        yield voter
    finally:
        voter.stop()


def test_a_claimed_2gib_frame_is_cut_at_once_and_costs_no_memory(one_voter: Voter) -> None:
    pid = one_voter.proc.pid
    before = _rss(pid)
    sent = 0
    chunk = b"\x00" * (64 * 1024)
    with socket.create_connection(("127.0.0.1", one_voter.port), timeout=30) as peer:
        peer.sendall(struct.pack("i", 2**31 - 1))  # pysyncobj's length prefix, then "the frame"
        with pytest.raises(OSError) as cut:  # EPIPE or ECONNRESET once the voter has closed
            while sent < 48 * MiB:
                peer.sendall(chunk)
                sent += len(chunk)
        assert cut.value.errno in (errno.EPIPE, errno.ECONNRESET), cut.value
    # What got through before the reset is what loopback's socket buffers hold, not the frame.
    assert sent < 8 * MiB, f"{sent} bytes were accepted after a 2 GiB claim"
    assert _rss(pid) - before < 8 * MiB
    _commits(one_voter, "after", 3)


def test_idle_and_trickling_unauthenticated_connections_are_closed(one_voter: Voter) -> None:
    idle = socket.create_connection(("127.0.0.1", one_voter.port))
    trickle = socket.create_connection(("127.0.0.1", one_voter.port))
    try:
        trickle.sendall(struct.pack("i", 4000))  # a plausible pre-auth frame, sent a byte at a time
        deadline = time.monotonic() + 30
        while not (_closed_by_peer(idle) and _closed_by_peer(trickle)):
            assert time.monotonic() < deadline, "unauthenticated connections still open after 30 s (timeout 1 s)"
            try:
                trickle.send(b"x")
            except OSError:
                pass
            time.sleep(0.05)
    finally:
        idle.close()
        trickle.close()
    _commits(one_voter, "after", 3)


def test_accept_out_of_descriptors_keeps_the_listener(tmp_path: Path) -> None:
    voters = make_voters(2, tmp_path, SECRET)
    # pysyncobj: the voter with the greater address dials the other, so `listener` is the one
    # every peer must reach through its listening socket.
    listener, dialer = sorted(voters, key=lambda v: v.address)
    crowd: list[socket.socket] = []
    try:
        for voter in voters:
            voter.start()
        _commits(dialer, "before", 3)

        pid = listener.proc.pid
        limit = max(_open_fds(pid)) + 4
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
        free = limit - len(_open_fds(pid))
        for _ in range(free + 4):  # more than it can accept: the rest wait in the backlog
            try:
                crowd.append(socket.create_connection(("127.0.0.1", listener.port), timeout=5))
            except ConnectionRefusedError:
                break  # the listener is gone already (asserted below)
        wait_until(lambda: len(_open_fds(pid)) >= limit, 20, what="the listener's descriptors all in use")
        # It has met EMFILE once it says so (pysyncobj's own transport closed the socket instead).
        wait_until(lambda: listener.logged("quorum.accept_paused") or not _listening(listener.port), 20,
                   what="accept() to fail with EMFILE")
        for sock in crowd:
            sock.close()
        crowd.clear()

        assert _listening(listener.port), "the quorum listener closed after EMFILE"
        # The dialer restarts: it can only reach the quorum (2 of 2) through that listener.
        dialer.kill()
        dialer.start()
        _commits(dialer, "after", 3)
        listener.wait_for(lambda _: len([k for k in listener.committed_keys() if k.startswith("after-")]) == 3,
                          20, "the listener to commit too")
    finally:
        for sock in crowd:
            sock.close()
        for voter in voters:
            voter.stop()


# --- in this process: the test reaches the voter's own listening socket ------------------------


def _listening_socket(port: int) -> socket.socket:
    """A duplicate of this process's socket listening on `port` (shares its open file)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            candidate = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue  # not a socket, or already closed
        try:
            if (candidate.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    and candidate.getsockname()[1] == port):
                return candidate
        except OSError:
            pass
        candidate.close()
    raise AssertionError(f"no socket of this process listens on port {port}")


async def _status_ok(address: str) -> bool:
    status = await trio.to_thread.run_sync(lambda: query_voter(1, address, SECRET, {address: 1}, timeout=2.0))
    return status.reachable


async def test_a_listener_that_hangs_up_is_bound_again(tmp_path: Path) -> None:
    port = free_low_port(set())
    address = f"127.0.0.1:{port}"
    async with open_quorum(1, {1: address}, SECRET, tmp_path) as quorum:
        await quorum.submit(Config("cluster", "", "before", "1"))
        with _listening_socket(port) as dup:
            dup.shutdown(socket.SHUT_RDWR)  # the kernel wakes poll with POLLHUP; accept() fails
        # An authenticated client (pysyncobj's admin channel) gets through the new listener.
        deadline = trio.current_time() + 20
        while not await _status_ok(address):
            assert trio.current_time() < deadline, "the quorum listener was not bound again"
            await trio.sleep(0.1)
        await quorum.submit(Config("cluster", "", "after", "1"))


async def test_a_listener_that_cannot_be_bound_again_stops_the_node(tmp_path: Path) -> None:
    port = free_low_port(set())
    settings = QuorumSettings(listener_restore_timeout=1.0)
    squatter = socket.socket()
    # The voter's shut-down socket holds the port until its tick closes it; SO_REUSEADDR lets
    # the squatter bind beside a socket that no longer listens.
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    body_cancelled = False
    try:
        with pytest.raises(QuorumError, match=f"quorum listener 127.0.0.1:{port} lost .* not bound again"):
            async with open_quorum(1, {1: f"127.0.0.1:{port}"}, SECRET, tmp_path, settings=settings) as quorum:
                await quorum.submit(Config("cluster", "", "before", "1"))
                for _ in range(10):  # the voter re-binds after 0.25 s: take the port before it does
                    with _listening_socket(port) as dup:
                        dup.shutdown(socket.SHUT_RDWR)
                    try:
                        squatter.bind(("127.0.0.1", port))
                        squatter.listen()
                        break
                    except OSError:
                        await trio.sleep(0.5)  # it won: lose its new socket again
                else:
                    raise AssertionError("could not take the port from the voter")
                try:
                    await trio.sleep(60)
                except trio.Cancelled:
                    body_cancelled = True
                    raise
    finally:
        squatter.close()
    assert body_cancelled
