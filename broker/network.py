"""The Kafka listener: accept connections, frame requests, answer in order.

Requests on one connection are *processed* strictly in order, as Kafka does:
a request's handler runs to completion before the next one starts, so every
state change (appends, commits, joins) happens in request order. A handler
may hand back a `Deferred` for the part that only waits — an acks=all produce
waiting for the ISR — and the next requests are then processed while it
waits; responses still go back strictly in request order (librdkafka
pipelines up to 5 requests, so acks=all throughput is not bound by one
replication round trip per request). A connection that sends garbage or an
oversize frame is logged and closed; every other connection is unaffected.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from raftka.broker.zero_copy import ChunkedResponse, send_response
from raftka.client.protocol import FrameDecoder, FrameTooLarge, ProtocolError

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


class Deferred:
    """A response still being computed after the request's ordered part is done."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], Awaitable[bytes | None]]) -> None:
        self.finish = finish


RequestHandler = Callable[[bytes | bytearray | memoryview, ConnectionInfo], Awaitable["bytes | Deferred | None"]]

# Responses a connection may owe at once; the next request waits beyond this (backpressure).
MAX_IN_FLIGHT = 16

_connection_ids = itertools.count(1)


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


async def _write_responses(stream: trio.SocketStream,
                           responses: trio.MemoryReceiveChannel[bytes | ChunkedResponse | Deferred | None]) -> None:
    """Send responses in request order. A Deferred is awaited here, in its turn: it only
    waits (for replication), so nothing is gained by running it in a task of its own, and
    the requests after it keep being processed meanwhile by the reader."""
    async with responses:
        async for response in responses:
            if isinstance(response, Deferred):
                response = await response.finish()  # an error ends the connection, in order
            if response is not None:
                await send_response(stream, response)


async def _read_requests(stream: trio.SocketStream, handler: RequestHandler, info: ConnectionInfo,
                         decoder: FrameDecoder,
                         responses: trio.MemorySendChannel[bytes | ChunkedResponse | Deferred | None]) -> None:
    async with responses:
        while True:
            data = await stream.receive_some(RECEIVE_CHUNK)
            if not data:
                return
            for frame in decoder.feed(data):
                await responses.send(await handler(frame, info))


async def _serve(stream: trio.SocketStream, handler: RequestHandler, info: ConnectionInfo,
                 max_request_bytes: int) -> None:
    decoder = FrameDecoder(max_frame_size=max_request_bytes)
    send_responses, receive_responses = trio.open_memory_channel[bytes | ChunkedResponse | Deferred | None](
        MAX_IN_FLIGHT)
    error: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_responses, stream, receive_responses)
        # When the client half-closes, or sends garbage after good requests, the writer
        # still sends every answer owed (as Kafka would have) before the connection ends.
        try:
            await _read_requests(stream, handler, info, decoder, send_responses)
        except Exception as exc:
            error = exc
    if error is not None:
        raise error


def _first_error(exc: BaseException) -> BaseException:
    """The exception that ended a connection (trio nurseries wrap them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def serve_connection(
    stream: trio.SocketStream, handler: RequestHandler, listener: str, max_request_bytes: int
) -> None:
    """Serve one client connection until it closes or misbehaves; never raises."""
    info = ConnectionInfo(next(_connection_ids), listener, _peer(stream))
    try:
        async with stream:
            await _serve(stream, handler, info, max_request_bytes)
    except Exception as group:
        exc = _first_error(group)
        if isinstance(exc, FrameTooLarge):
            log.warning("connection.closed", reason="request_too_large", peer=info.peer, error=str(exc))
        elif isinstance(exc, ProtocolError):
            log.warning("connection.closed", reason="malformed_request", peer=info.peer, error=str(exc))
        elif isinstance(exc, CloseConnection):
            log.warning("connection.closed", reason="handler", peer=info.peer, error=str(exc))
        elif isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)):
            pass  # the client went away: nothing to answer
        else:
            # A bug met while serving one connection closes that connection, never the broker.
            log.error("connection.closed", reason="internal_error", peer=info.peer, exc_info=exc)


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
