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

Limits, with Kafka's names (the keys are in raft_meta/config/node_config.py):

- `socket.request.max.bytes`: a size prefix above it closes the connection
  before any of the request is buffered.
- `queued.max.request.bytes`: the bytes held by requests partly received or
  not yet processed, over all connections (broker/net/request_memory.py). When it
  is spent, connections stop reading until memory is released.
- `connections.max.idle.ms`: a connection is closed when, for that long, no
  whole request has arrived and no response has been sent. Bytes of a request
  that never completes do not count (slowloris), nor does time in a handler
  (Kafka, too, counts only network activity: a 24-day long-poll does not pin
  a connection).
- `max.connections`, `max.connections.per.ip` (+ overrides): see
  broker/net/connection_quotas.py.
- An `accept()` error (EMFILE, ENFILE, ENOBUFS, ...) is logged and retried
  after a back-off (100 ms doubling to 1 s); the listener is never lost.

Security (broker/net/tls.py, broker/net/sasl_state.py): an SSL / SASL_SSL listener
wraps each connection in `trio.SSLStream`; the TLS handshake must finish
within TLS_HANDSHAKE_TIMEOUT_S (and within `connections.max.idle.ms`), else
the connection is closed. Under TLS the connection reads what the TLS layer
returns (at most TLS_RECEIVE_CHUNK) and reserves it from the request-memory
budget just after, and Fetch record bytes are read from the segments in a
worker thread instead of sendfile (broker/net/zero_copy.py). On SASL listeners
requests before authentication are bounded by `sasl.server.max.receive.size`.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import math
import ssl
import struct
import termios
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import structlog
import trio

from raftka.broker.net.connection_quotas import ConnectionLimits, ConnectionQuotas, normalise_ip
from raftka.broker.net.request_memory import RequestMemoryPool
from raftka.broker.net.zero_copy import ChunkedResponse, send_response
from raftka.client.protocol import FrameDecoder, FrameTooLarge, ProtocolError
from raftka.client.protocol.framing import DEFAULT_MAX_FRAME_SIZE
from raftka.client.tls import drain_tls

log = structlog.get_logger("broker.network")

RECEIVE_CHUNK = 256 * 1024
TLS_RECEIVE_CHUNK = 64 * 1024
TLS_HANDSHAKE_TIMEOUT_S = 10.0
ACCEPT_BACKOFF_MIN_S = 0.1
ACCEPT_BACKOFF_MAX_S = 1.0
# Repeated warnings (refused connections, a spent memory budget) are logged at most this often,
# with the number left out, so a flood of connections cannot flood the log.
WARNING_INTERVAL_S = 1.0


@dataclass(slots=True)
class ConnectionInfo:
    """Who is on the other end, for handlers, the authorizer and logs.

    `principal` is Kafka's `User:<name>` form; `User:ANONYMOUS` until a listener's
    authentication (TLS client certificate or SASL) sets it. Only the connection's own task
    writes it.
    """

    connection_id: int
    listener: str
    peer: str
    principal: str = "User:ANONYMOUS"
    # The SASL exchange still owed on a SASL listener (broker/net/sasl_state.py); None once done
    # and on other listeners.
    authenticator: object | None = None
    # A client quota's throttle (broker/client_quotas.py, KIP-219): no request is read or
    # processed on this connection before this trio time (the channel is muted).
    muted_until: float = 0.0
    # Called (synchronously, never raising) once the connection has closed: state a handler
    # keeps per connection (share sessions) is let go.
    on_close: list[Callable[[], None]] = field(default_factory=list)

    @property
    def host(self) -> str:
        """The peer's address without its port (what ACL host patterns match)."""
        host, _, port = self.peer.rpartition(":")
        return host.strip("[]") if host and port.isdigit() else self.peer


class CloseConnection(Exception):
    """Raised by a handler to close the offending connection after logging why."""


class FinalResponse:
    """A response after which the connection is closed (a failed SASL authentication)."""

    __slots__ = ("payload", "reason")

    def __init__(self, payload: bytes, reason: str) -> None:
        self.payload = payload
        self.reason = reason


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


class ListenerLimits:
    """The limits every Kafka listener of one broker shares (Kafka's SocketServer settings):
    one connection count and one request-memory budget for all of them."""

    def __init__(self, *, max_request_bytes: int = DEFAULT_MAX_FRAME_SIZE,
                 connections_max_idle_ms: int = 600_000,
                 connection_limits: ConnectionLimits | None = None,
                 queued_max_request_bytes: int = -1) -> None:
        self.max_request_bytes = max_request_bytes
        self.idle_s = connections_max_idle_ms / 1000.0
        self.quotas = ConnectionQuotas(connection_limits or ConnectionLimits())
        self.memory = RequestMemoryPool(None if queued_max_request_bytes < 0 else queued_max_request_bytes)
        self.refusal_warnings = _Throttled("connection.rejected")
        self.memory_warnings = _Throttled("request_memory.exhausted")
        self.slot_warnings = _Throttled("listener.connection_limit_reached")

    @classmethod
    def from_config(cls, config, listener_names: Iterable[str], inter_broker_listener: str) -> ListenerLimits:
        names = list(listener_names)
        return cls(
            max_request_bytes=config.socket_request_max_bytes,
            connections_max_idle_ms=config.connections_max_idle_ms,
            connection_limits=ConnectionLimits(
                max_connections=config.max_connections,
                max_connections_per_ip=config.max_connections_per_ip,
                per_ip_overrides=dict(config.max_connections_per_ip_overrides),
                # Kafka protects the inter-broker listener only when there are others to fill.
                protected_listener=inter_broker_listener if len(names) > 1 else None,
            ),
            queued_max_request_bytes=config.queued_max_request_bytes,
        )


class _Throttled:
    """A warning logged at most once per WARNING_INTERVAL_S per key (e.g. per client address),
    counting the ones left out."""

    MAX_KEYS = 1024

    def __init__(self, event: str) -> None:
        self.event = event
        self._keys: dict[object, tuple[float, int]] = {}  # key -> (next log time, suppressed)

    def warn(self, key: object = None, **fields: object) -> bool:
        """Log the warning unless it was logged for `key` less than WARNING_INTERVAL_S ago;
        True if it was logged now."""
        now = trio.current_time()
        next_time, suppressed = self._keys.get(key, (-math.inf, 0))
        if now < next_time:
            self._keys[key] = (next_time, suppressed + 1)
            return False
        if len(self._keys) >= self.MAX_KEYS:
            self._keys.clear()
        self._keys[key] = (now + WARNING_INTERVAL_S, 0)
        log.warning(self.event, suppressed=suppressed, **fields)
        return True


class _Connection:
    """One connection's state shared by its reader and writer."""

    __slots__ = ("info", "decoder", "limits", "held", "scope")

    def __init__(self, info: ConnectionInfo, limits: ListenerLimits) -> None:
        self.info = info
        self.limits = limits
        self.decoder = FrameDecoder(max_frame_size=limits.max_request_bytes)
        self.held = 0  # bytes of limits.memory this connection holds
        self.scope = trio.CancelScope(deadline=trio.current_time() + limits.idle_s)

    def active(self) -> None:
        """A whole request arrived or a response went out: the idle clock starts again."""
        self.scope.deadline = trio.current_time() + self.limits.idle_s

    async def reserve(self, size: int) -> None:
        memory = self.limits.memory
        if not memory.may_reserve(self, size):
            self.limits.memory_warnings.warn(peer=self.info.peer, used_bytes=memory.used,
                                           queued_max_request_bytes=memory.capacity,
                                           waiting_connections=memory.waiting + 1)
        await memory.reserve(self, size)
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size
        self.limits.memory.release(size)

    def close(self) -> None:
        self.limits.memory.request_finished(self)
        self.release(self.held)


async def _write_responses(stream: trio.SocketStream, conn: _Connection,
                           responses: trio.MemoryReceiveChannel[bytes | ChunkedResponse | Deferred | None]) -> None:
    """Send responses in request order. A Deferred is awaited here, in its turn: it only
    waits (for replication), so nothing is gained by running it in a task of its own, and
    the requests after it keep being processed meanwhile by the reader."""
    async with responses:
        async for response in responses:
            if isinstance(response, Deferred):
                response = await response.finish()  # an error ends the connection, in order
            if isinstance(response, FinalResponse):
                await send_response(stream, response.payload)
                raise CloseConnection(response.reason)
            if response is not None:
                await send_response(stream, response)
                conn.active()


def _ready_bytes(sock: trio.socket.SocketType) -> int:
    """Bytes the kernel holds for `sock`, ready to be received (FIONREAD)."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


async def _receive(stream: trio.abc.Stream, conn: _Connection) -> bytes:
    if isinstance(stream, trio.SSLStream):
        # The kernel's byte count says nothing about the plaintext the TLS layer holds: receive,
        # then account (at most one TLS_RECEIVE_CHUNK beyond the budget per connection).
        data = await stream.receive_some(TLS_RECEIVE_CHUNK)
        if data:
            more = drain_tls(stream, TLS_RECEIVE_CHUNK - len(data))
            if more:
                data = data + more
        await conn.reserve(len(data))
        return data
    sock = stream.socket
    # Reserve what has arrived, then receive it: an idle connection holds no memory.
    ready = _ready_bytes(sock)
    if not ready:
        await trio.lowlevel.wait_readable(sock)
        ready = _ready_bytes(sock)
    window = min(max(ready, 1), RECEIVE_CHUNK)  # nothing ready once readable: EOF or error
    await conn.reserve(window)  # waits while the request-memory budget is spent
    data = await stream.receive_some(window)
    conn.release(window - len(data))
    return data


async def _wait_unmuted(conn: _Connection) -> None:
    """A throttled connection reads nothing until its throttle time is over (Kafka mutes the
    channel), so a client that ignores `throttle_time_ms` is held back all the same."""
    until = conn.info.muted_until
    if until > trio.current_time():
        await trio.sleep_until(until)
        conn.active()  # muted time is the broker's doing, not the client's idleness


async def _read_requests(stream: trio.abc.Stream, handler: RequestHandler, conn: _Connection,
                         responses: trio.MemorySendChannel[bytes | ChunkedResponse | Deferred | None]) -> None:
    decoder, memory, info = conn.decoder, conn.limits.memory, conn.info
    async with responses:
        while True:
            await _wait_unmuted(conn)
            data = await _receive(stream, conn)
            if not data:
                return
            frames = decoder.feed(data)
            if frames:
                memory.request_finished(conn)
            if decoder.frame_size is not None:
                memory.request_started(conn)
            for frame in frames:
                await _wait_unmuted(conn)
                conn.active()
                try:
                    response = await handler(frame, info)
                finally:
                    conn.release(len(frame) + 4)  # processed: its memory goes back to the budget
                if info.authenticator is None and decoder.max_frame_size != conn.limits.max_request_bytes:
                    decoder.max_frame_size = conn.limits.max_request_bytes  # authenticated: full size
                await responses.send(response)


async def _serve(stream: trio.SocketStream, handler: RequestHandler, conn: _Connection) -> None:
    send_responses, receive_responses = trio.open_memory_channel[bytes | ChunkedResponse | Deferred | None](
        MAX_IN_FLIGHT)
    error: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_responses, stream, conn, receive_responses)
        # When the client half-closes, or sends garbage after good requests, the writer
        # still sends every answer owed (as Kafka would have) before the connection ends.
        try:
            await _read_requests(stream, handler, conn, send_responses)
        except Exception as exc:
            error = exc
    if error is not None:
        raise error


def _first_error(exc: BaseException) -> BaseException:
    """The exception that ended a connection (trio nurseries wrap them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


TLS_ALERT_SEND_S = 1.0


async def _send_tls_alert(tls: trio.SSLStream, stream: trio.SocketStream) -> None:
    """Send the alert a failed handshake left unsent, as Kafka's broker does: trio's SSLStream
    drops what OpenSSL wrote for the peer when the handshake raises (its outgoing memory BIO),
    so the client would see the connection close, not why ("certificate required", "unknown
    CA"); with TLS 1.3 a client whose certificate is refused has finished its side of the
    handshake and would take the close for an outage and retry. Bounded in time; best effort."""
    outgoing = getattr(tls, "_outgoing", None)  # trio's ssl.MemoryBIO (trio/_ssl.py)
    alert = outgoing.read() if isinstance(outgoing, ssl.MemoryBIO) else b""
    if alert:
        with trio.move_on_after(TLS_ALERT_SEND_S):
            try:
                await stream.send_all(alert)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # the client left already


async def _secure(stream: trio.SocketStream, transport, info: ConnectionInfo,
                  conn: _Connection) -> trio.abc.Stream | None:
    """TLS handshake (bounded in time) and the connection's principal / SASL state; None when
    the handshake failed (logged)."""
    out: trio.abc.Stream = stream
    if transport.ssl_context is not None:
        tls = trio.SSLStream(stream, transport.ssl_context, server_side=True)
        with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S) as scope:
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                log.info("connection.closed", reason="tls_handshake_failed", peer=info.peer,
                         listener=info.listener, error=str(exc.__cause__ or exc))
                await _send_tls_alert(tls, stream)
                return None
        if scope.cancelled_caught:
            log.info("connection.closed", reason="tls_handshake_timeout", peer=info.peer, listener=info.listener,
                     seconds=TLS_HANDSHAKE_TIMEOUT_S)
            return None
        try:
            info.principal = transport.certificate_principal(tls.getpeercert(binary_form=True))
        except ValueError as exc:  # no ssl.principal.mapping.rules rule matched
            log.warning("connection.closed", reason="principal_mapping_failed", peer=info.peer, error=str(exc))
            return None
        if info.principal != "User:ANONYMOUS":
            log.info("tls.client_authenticated", peer=info.peer, listener=info.listener, principal=info.principal)
        out = tls
    if transport.sasl:
        info.authenticator = transport.new_authenticator()
        conn.decoder.max_frame_size = min(conn.decoder.max_frame_size, transport.security.max_receive_size)
    return out


async def serve_connection(
    stream: trio.SocketStream, handler: RequestHandler, listener: str, limits: ListenerLimits,
    transport=None,
) -> None:
    """Serve one client connection until it closes, misbehaves or stays idle; never raises.
    `transport` (broker/net/tls.py ListenerTransport) adds TLS and SASL; None = PLAINTEXT."""
    info = ConnectionInfo(next(_connection_ids), listener, _peer(stream))
    conn = _Connection(info, limits)
    try:
        async with stream:
            with conn.scope:
                served: trio.abc.Stream | None = stream
                if transport is not None:
                    served = await _secure(stream, transport, info, conn)
                if served is not None:
                    await _serve(served, handler, conn)
            if conn.scope.cancelled_caught:
                log.info("connection.closed", reason="idle", peer=info.peer,
                         connections_max_idle_ms=round(limits.idle_s * 1000),
                         partial_request_bytes=conn.decoder.buffered)
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
    finally:
        conn.close()
        for closed in info.on_close:
            try:
                closed()
            except Exception:
                log.exception("connection.close_hook_failed", peer=info.peer)


async def _accept_loop(listener_socket: trio.SocketListener, name: str, handler: RequestHandler,
                       limits: ListenerLimits, nursery: trio.Nursery, transport=None) -> None:
    async with listener_socket:
        await _accept_connections(listener_socket, name, handler, limits, nursery, transport)


async def _accept_connections(listener_socket: trio.SocketListener, name: str, handler: RequestHandler,
                              limits: ListenerLimits, nursery: trio.Nursery, transport=None) -> None:
    quotas = limits.quotas
    backoff = 0.0
    failures = 0
    while True:
        if not quotas.slot_available(name):
            # Kafka's acceptor blocks too: new connections wait in the kernel's backlog.
            warned = limits.slot_warnings.warn(name, listener=name, connections=quotas.total,
                                               max_connections=quotas.limits.max_connections)
            waited_from = trio.current_time()
            await quotas.wait_for_slot(name)
            if warned:
                log.info("listener.accepting_again", listener=name, connections=quotas.total,
                         waited_ms=round((trio.current_time() - waited_from) * 1000))
        try:
            stream = await listener_socket.accept()
        except OSError as exc:  # EMFILE, ENFILE, ENOBUFS, ENOMEM, ...: keep the listener, retry
            failures += 1
            backoff = min(ACCEPT_BACKOFF_MAX_S, max(ACCEPT_BACKOFF_MIN_S, backoff * 2))
            log.warning("listener.accept_failed", listener=name, error=str(exc),
                        errno=errno.errorcode.get(exc.errno or 0, exc.errno),
                        retry_in_ms=round(backoff * 1000), failures=failures)
            await trio.sleep(backoff)
            continue
        if failures:
            log.info("listener.accept_recovered", listener=name, failures=failures)
            backoff, failures = 0.0, 0
        try:
            ip = normalise_ip(stream.socket.getpeername()[0])
        except OSError:  # the client is already gone
            stream.socket.close()
            continue
        refusal = quotas.admit(ip)
        if refusal is not None:
            limits.refusal_warnings.warn(ip, listener=name, peer=ip, reason=refusal.reason, limit=refusal.limit,
                                  error=str(refusal))
            stream.socket.close()
            continue
        throttle_ms = quotas.creation_throttle_ms(ip, trio.current_time())
        if throttle_ms:
            limits.refusal_warnings.warn(ip, listener=name, peer=ip, reason="connection_creation_rate",
                                         throttle_ms=throttle_ms)
            nursery.start_soon(_close_throttled, stream, limits, ip, throttle_ms)
            continue
        nursery.start_soon(_serve_admitted, stream, handler, name, limits, ip, transport)


async def _close_throttled(stream: trio.SocketStream, limits: ListenerLimits, ip: str, throttle_ms: int) -> None:
    """Kafka's delayed close of a connection over its ip's connection_creation_rate: held,
    unserved and counted, for the throttle time, then closed."""
    try:
        await trio.sleep(throttle_ms / 1000.0)
    finally:
        stream.socket.close()
        limits.quotas.release(ip)


async def _serve_admitted(stream: trio.SocketStream, handler: RequestHandler, listener: str,
                          limits: ListenerLimits, ip: str, transport=None) -> None:
    try:
        await serve_connection(stream, handler, listener, limits, transport)
    finally:
        limits.quotas.release(ip)


async def serve_listener(
    host: str,
    port: int,
    handler: RequestHandler,
    *,
    listener: str,
    limits: ListenerLimits | None = None,
    transport=None,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on host:port and serve every connection in its own task, within `limits`
    (shared by every listener of the broker); `transport` adds TLS/SASL (broker/net/tls.py)."""
    limits = limits or ListenerLimits()
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    log.info("listener.started", listener=listener, host=host, port=port,
             security_protocol=transport.security.protocol if transport is not None else "PLAINTEXT")
    async with trio.open_nursery() as nursery:
        for listener_socket in listeners:
            nursery.start_soon(_accept_loop, listener_socket, listener, handler, limits, nursery, transport)
        task_status.started(listeners)
