"""Certificates reload without a restart (broker/net/tls.py ListenerTransport.reload_if_changed):
a replaced key store file is served to the next connection, on a real socket."""

from __future__ import annotations

import ssl

import trio

from raftka.broker.net.network import serve_listener
from raftka.broker.net.tls import ListenerTransport
from raftka.raft_meta.config.security_config import ListenerSecurity, SslSettings
from raftka.testing import certs


async def _served_cn(port: int, ca_path) -> str:
    context = ssl.create_default_context(cafile=str(ca_path))
    stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", port, ssl_context=context)
    await stream.do_handshake()
    cert = stream.getpeercert()
    await stream.aclose()
    return dict(item[0] for item in cert["subject"])["commonName"]


async def test_replaced_keystore_is_served_to_new_connections(tmp_path) -> None:
    ca = certs.make_ca()
    ca_path = certs.write_ca(ca, tmp_path)
    keystore = tmp_path / "keystore.pem"
    certs.write_keystore(certs.issue(ca, "first", hosts=("127.0.0.1",)), ca, keystore)
    transport = ListenerTransport(ListenerSecurity("SSL", "SSL", SslSettings(keystore_location=str(keystore))))

    async def handler(frame, conn):
        return None

    async with trio.open_nursery() as nursery:
        sockets = await nursery.start(lambda task_status: serve_listener(
            "127.0.0.1", 0, handler, listener="SSL", transport=transport, task_status=task_status))
        port = sockets[0].socket.getsockname()[1]
        assert await _served_cn(port, ca_path) == "first"
        assert not await transport.reload_if_changed()  # nothing changed
        certs.write_keystore(certs.issue(ca, "second", hosts=("127.0.0.1",)), ca, keystore)
        assert await transport.reload_if_changed()
        assert await _served_cn(port, ca_path) == "second"
        nursery.cancel_scope.cancel()
