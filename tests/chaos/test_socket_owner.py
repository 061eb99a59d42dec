"""chaos/socket_owner.py finds which socket (and so which process) dialled a connection,
by an exact sock_diag lookup and, where netlink is unavailable, by /proc/net/tcp."""

from __future__ import annotations

import os
import socket

import pytest

from raftka.chaos import socket_owner


@pytest.fixture
def connection():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        accepted, peer = server.accept()
        yield client, accepted, peer
        client.close()
        accepted.close()


@pytest.mark.parametrize("netlink", [True, False])
def test_the_dialler_socket_and_process(connection, netlink, monkeypatch):
    client, accepted, peer = connection
    if not netlink:
        monkeypatch.setattr(socket_owner, "_diag_inode", lambda local, remote: socket_owner.UNAVAILABLE)
    us = accepted.getsockname()
    assert socket_owner.socket_inode(peer, us) == os.fstat(client.fileno()).st_ino
    assert socket_owner.connection_owner(peer, us, [os.getpid()]) == os.getpid()
    assert socket_owner.socket_inode(("127.0.0.1", 1), ("127.0.0.1", 2)) is None


def test_netlink_answers_exactly(connection, monkeypatch):
    client, accepted, peer = connection
    assert socket_owner._diag_inode(peer, accepted.getsockname()) == os.fstat(client.fileno()).st_ino
    assert socket_owner._diag_inode(accepted.getsockname(), peer) == os.fstat(accepted.fileno()).st_ino
    # A dialler that already closed its socket: "none", from netlink alone (no table read).
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail("read /proc/net/tcp"))
    assert socket_owner._diag_inode(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert socket_owner.socket_inode(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
