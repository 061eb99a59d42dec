"""The Kafka listener: accept connections, frame requests, answer in order.

Like Kafka's SocketServer, each connection handles one request at a time:
pipelined requests are read ahead and buffered by the frame decoder, then
answered strictly in request order. A connection that sends garbage or an
oversize frame is logged and closed; every other connection is unaffected.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from client.protocol import FrameDecoder, FrameTooLarge, ProtocolError

log = structlog.get_logger("broker.network")

RECEIVE_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """Who is on the other end, for handlers and logs."""

    connection_id: int
    listener: str
    peer: str


class CloseConnection(Exception):
    """Raised by a handler to close the offending connection after logging why."""


RequestHandler = Callable[[bytes | bytearray | memoryview, ConnectionInfo], Awaitable[bytes | None]]

_connection_ids = itertools.count(1)


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


async def serve_connection(
    stream: trio.SocketStream, handler: RequestHandler, listener: str, max_request_bytes: int
) -> None:
    """Serve one client connection until it closes or misbehaves."""
    info = ConnectionInfo(next(_connection_ids), listener, _peer(stream))
    decoder = FrameDecoder(max_frame_size=max_request_bytes)
    try:
        async with stream:
            while True:
                data = await stream.receive_some(RECEIVE_CHUNK)
                if not data:
                    return
                for frame in decoder.feed(data):
                    response = await handler(frame, info)
                    if response is not None:
                        await stream.send_all(response)
    except FrameTooLarge as exc:
        log.warning("connection.closed", reason="request_too_large", peer=info.peer, error=str(exc))
    except ProtocolError as exc:
        log.warning("connection.closed", reason="malformed_request", peer=info.peer, error=str(exc))
    except CloseConnection as exc:
        log.warning("connection.closed", reason="handler", peer=info.peer, error=str(exc))
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass  # the client went away: nothing to answer
    except Exception:
        # A bug met while serving one connection closes that connection, never the broker.
        log.exception("connection.closed", reason="internal_error", peer=info.peer)


async def serve_listener(
    host: str,
    port: int,
    handler: RequestHandler,
    *,
    listener: str,
    max_request_bytes: int,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on host:port and serve every connection in its own task."""
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    log.info("listener.started", listener=listener, host=host, port=port)

    async def on_connection(stream: trio.SocketStream) -> None:
        await serve_connection(stream, handler, listener, max_request_bytes)

    async with trio.open_nursery() as nursery:
        task_status.started(listeners)
        await trio.serve_listeners(on_connection, listeners, handler_nursery=nursery)
