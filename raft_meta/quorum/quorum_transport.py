"""pysyncobj's TCP transport, bounded against peers that have not authenticated.

pysyncobj 0.3.17's `TCPTransport` (read in its source; the version range is pinned in
pyproject.toml because this module relies on its internals) trusts its port too much:

1. A connection reads whatever length its 4-byte prefix claims (up to 2**31 - 1 bytes)
   before the first byte is authenticated, growing a `bytes` buffer by concatenation
   (quadratic copying): one connection can pin a core and take gigabytes.
2. `TcpServer` closes its listening socket for good on any `accept()` error (EMFILE
   included) or poll error, and nothing re-binds it: the voter goes on running, but no
   peer can connect to it again.
3. A connection's timeout is checked only when that connection has an event, so an idle
   connection is never closed, and a trickling one refreshes its timer with every byte.

The fix is three small classes that SyncObj takes through `transportClass=`; pysyncobj
itself is unchanged:

- `QuorumConnection(TcpConnection)` replaces its read and frame-parsing steps (two
  methods reached through Python's name mangling; `_check_pysyncobj` below fails the
  import if a pysyncobj upgrade renames them). A `bytearray` holds the input (linear).
  Before the peer has *authenticated*, a frame may claim at most `PRE_AUTH_MAX_FRAME`
  bytes, checked as soon as its 4-byte prefix arrives, and no more than that is
  buffered ahead of parsing.
- `QuorumListener` replaces `TcpServer` (same `bind()`/`unbind()` contract). accept()
  errors that belong to one connection are skipped; running out of descriptors or
  memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses accepting with a growing back-off and
  keeps the socket; any other loss of the socket is repaired by binding again. If it
  cannot be bound again within `restore_timeout`, `on_fatal` is called: the node stops
  with an error (`open_quorum` raises `QuorumError`) instead of running deaf.
- `QuorumTransport(TCPTransport)` builds those two, closes connections that have not
  authenticated within `pre_auth_timeout` of opening (counted from the open, not from
  the last byte, so trickling does not help), and keeps at most
  `max_pre_auth_connections` of them (the oldest is dropped). It serves at most
  `max_observers` observers (pysyncobj's read-only peers: broker-only nodes, which hold the
  secret) at once; one more is refused at its handshake. A disconnected observer's connection
  is dropped (pysyncobj keeps it forever: one leaked per reconnect).

"Authenticated" uses pysyncobj's own handshake. Every frame is a Fernet token (keyed by
the quorum secret). Each side's first frame carries a fresh random key, and every later
frame it receives must carry that key back. So the first frame that decrypts AND carries
our fresh key proves the peer holds the secret now. That is frame 2 on an accepted
connection (frame 1 could be a replay) and frame 1 on a connection we opened. After that
the peer is trusted as pysyncobj trusts it: it holds the secret, and with it, pickles.

A thin authenticated front (a proxy in front of pysyncobj's port) was the alternative.
It would need its own handshake, a second port and a copy of every byte. This subclass
keeps pysyncobj's wire format and its single port, and needs no extra thread.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import pysyncobj.pickle as pysyncobj_pickle
import structlog
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection, _getAddrType
from pysyncobj.transport import TCPTransport

log = structlog.get_logger("raft_meta.quorum_transport")

_FRAME_LENGTH = struct.Struct("i")  # pysyncobj's prefix: a native-order signed 32-bit length
# pysyncobj's handshake frames are ~200 bytes (a Fernet token of a 32-byte key, or of the
# key and a "host:port" or a short admin command); 4 KiB leaves room and bounds the rest.
PRE_AUTH_MAX_FRAME = 4096
LISTEN_BACKLOG = 128
ACCEPTS_PER_EVENT = 16
# accept() errors that concern one incoming connection only (Linux passes pending network
# errors of the new socket through accept): skip that connection, keep listening.
_ONE_CONNECTION_ERRORS = frozenset({
    errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENETDOWN, errno.ENOPROTOOPT, errno.EHOSTDOWN,
    errno.ENONET, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.EINTR,
})
# Out of descriptors or memory: stop accepting for a while (the pending connections wait in
# the backlog) instead of spinning on a socket that stays readable.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _check_pysyncobj() -> None:
    """Fail at import, not at run time, if pysyncobj no longer has what is used here."""
    unconnected = TcpConnection(None)  # without a socket it touches no poller
    missing = [name for owner, name in (
        (TcpConnection, "_TcpConnection__processRead"),
        (TcpConnection, "_TcpConnection__processParseMessage"),
        (unconnected, "_TcpConnection__socket"),
        (unconnected, "_TcpConnection__recvBufferSize"),
        (TCPTransport, "_createServer"),
        (TCPTransport, "_onNewIncomingConnection"),
        (TCPTransport, "_onOutgoingConnected"),
        (TCPTransport, "_onMessageReceived"),
        (TCPTransport, "_onDisconnected"),
        (TCPTransport, "_shouldConnect"),
        (TCPTransport, "_onTick"),
        (TCPTransport, "_onIncomingMessageReceived"),
        (TCPTransport, "_connToNode"),
    ) if not hasattr(owner, name)]
    if missing:
        raise ImportError(f"pysyncobj's transport changed: {missing} missing; raft_meta/quorum/quorum_transport.py "
                          "was written for pysyncobj 0.3.17")


_check_pysyncobj()


@dataclass(frozen=True)
class TransportLimits:
    """What a peer that has not authenticated may cost this voter."""

    pre_auth_timeout: float = 5.0  # seconds from open to authenticated
    pre_auth_max_frame: int = PRE_AUTH_MAX_FRAME
    max_pre_auth_connections: int = 64
    accept_backoff_min: float = 0.05
    accept_backoff_max: float = 1.0
    restore_retry: float = 0.25  # between two attempts to bind a lost listener again
    restore_timeout: float = 10.0  # then the node gives up (on_fatal)
    # Observers (broker-only nodes: pysyncobj read-only peers, which hold the secret) this voter
    # serves at once: as leader it sends each the whole committed log, and a dump when behind.
    max_observers: int = 64


class _RateLimitedLog:
    """At most one line per event name and second, with the count of lines left out.

    Connections that hostile peers make are cheap for them: one line each would let them
    fill the disk."""

    def __init__(self, interval: float = 1.0) -> None:
        self._interval = interval
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def warning(self, event: str, **fields: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(event, float("-inf")) < self._interval:
                self._suppressed[event] = self._suppressed.get(event, 0) + 1
                return
            self._last[event] = now
            suppressed = self._suppressed.pop(event, 0)
        if suppressed:
            fields["suppressed"] = suppressed
        log.warning(event, **fields)


_peer_log = _RateLimitedLog()


class QuorumConnection(TcpConnection):
    """A pysyncobj connection that holds little for a peer that has not authenticated."""

    def __init__(self, poller, *, limits: TransportLimits, peer: str = "", socket=None, **kwargs) -> None:
        # Set before TcpConnection.__init__: with a socket it subscribes to the poller at once.
        self.limits = limits
        self.peer = peer
        self.incoming = socket is not None  # accepted by our listener (else opened by us)
        self.authenticated = False
        self.opened_at = time.monotonic()
        self._inbox = bytearray()
        super().__init__(poller, socket=socket, **kwargs)

    def connect(self, host, port):
        self._reset()
        self.peer = f"{host}:{port}"
        return super().connect(host, port)

    def disconnect(self):
        self._reset()
        super().disconnect()

    def refuse(self, reason: str) -> None:
        """Close a connection whose peer broke a limit, and say so (rate-limited).

        A connection we opened ourselves to a voter that does not answer is closed quietly:
        pysyncobj opens a new one after connectionRetryTime."""
        if self.state != CONNECTION_STATE.DISCONNECTED:
            if self.incoming:
                _peer_log.warning("quorum.peer_refused", peer=self.peer, reason=reason)
            else:
                log.debug("quorum.connection_closed", peer=self.peer, reason=reason)
            self.disconnect()

    def _reset(self) -> None:
        self._inbox = bytearray()
        self.authenticated = False
        self.opened_at = time.monotonic()
        self.recvLastTimestamp = 0

    def _frame_limit_broken(self) -> str | None:
        """Why the frame at the head of the input may not be read, else None."""
        if len(self._inbox) < _FRAME_LENGTH.size:
            return None
        (size,) = _FRAME_LENGTH.unpack_from(self._inbox)
        if size < 0:
            return f"frame length {size}; expected >= 0"
        if not self.authenticated and size > self.limits.pre_auth_max_frame:
            return (f"frame length {size} before authenticating; expected <= {self.limits.pre_auth_max_frame} "
                    "(wrong controller.quorum.secret, or not a raftka voter)")
        return None

    # Replaces TcpConnection.__processRead: same socket handling, bounded and linear buffering.
    def _TcpConnection__processRead(self):
        if not self.authenticated and len(self._inbox) >= _FRAME_LENGTH.size + self.limits.pre_auth_max_frame:
            return False  # parse what is here first; poll is level-triggered, the rest waits in the socket
        sock = self._TcpConnection__socket
        try:
            incoming = sock.recv(self._TcpConnection__recvBufferSize)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or not incoming:
            if not self.incoming and not self.authenticated:
                # The voter we dialled hung up before a frame of its own: it refused ours. Said
                # here too, so the node with the wrong secret learns it from its own log.
                _peer_log.warning("quorum.peer_hung_up", peer=self.peer, reason=(
                    "the voter closed our connection before authenticating: is "
                    "controller.quorum.secret the same on every node?"))
            self.disconnect()
            return False
        self._inbox += incoming
        problem = self._frame_limit_broken()
        if problem is not None:
            self.refuse(problem)
            return False
        return True

    # Replaces TcpConnection.__processParseMessage: the same decoding, plus the limits and
    # the "authenticated" mark. Returns one message or None (nothing complete, or closed).
    def _TcpConnection__processParseMessage(self):
        problem = self._frame_limit_broken()
        if problem is not None:
            self.refuse(problem)
            return None
        inbox = self._inbox
        if len(inbox) < _FRAME_LENGTH.size:
            return None
        (size,) = _FRAME_LENGTH.unpack_from(inbox)
        end = _FRAME_LENGTH.size + size
        if len(inbox) < end:
            return None
        data = bytes(inbox[_FRAME_LENGTH.size:end])
        del inbox[:end]  # bytearray drops its head in place
        fresh = False
        try:
            if self.encryptor is None:
                raise ValueError("no quorum secret: refusing to unpickle unauthenticated data")
            timestamp = self.encryptor.extract_timestamp(data)
            if timestamp < self.recvLastTimestamp:
                raise ValueError("frame older than the previous one")
            self.recvLastTimestamp = timestamp
            message = pysyncobj_pickle.loads(zlib.decompress(self.encryptor.decrypt(data)))
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise ValueError("frame does not carry this connection's key (a replay?)")
                fresh = True
        except Exception as exc:  # noqa: BLE001 - any undecodable frame closes its connection
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.refuse(f"frame failed authentication ({detail}); a different "
                        "controller.quorum.secret on the two nodes, or not a raftka voter")
            return None
        if fresh:
            self.authenticated = True
        return message


class QuorumListener:
    """The voter's listening socket; replaces pysyncobj's TcpServer (see the module docstring).

    Runs in pysyncobj's tick thread: `tick(now)` is called once per tick."""

    def __init__(self, poller, host: str, port: int, on_new_connection: Callable[[QuorumConnection], None], *,
                 limits: TransportLimits, send_buffer_size: int, recv_buffer_size: int, connection_timeout: float,
                 on_fatal: Callable[[str], None]) -> None:
        self._poller = poller
        self.host, self.port = host, int(port)
        self._family = _getAddrType(host)
        self._on_new_connection = on_new_connection
        self._limits = limits
        self._send_buffer_size = send_buffer_size
        self._recv_buffer_size = recv_buffer_size
        self._connection_timeout = connection_timeout
        self._on_fatal = on_fatal
        self._socket: socket.socket | None = None
        self._stopped = False
        self._backoff = 0.0
        self._paused_until: float | None = None
        self._lost_at: float | None = None
        self._lost_reason = ""
        self._next_restore = 0.0
        self.failed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def bind(self) -> None:
        """Open, bind and listen (raises OSError: pysyncobj counts bind attempts at start)."""
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_size)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer_size)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setblocking(False)
            sock.bind((self.host, self.port))
            sock.listen(LISTEN_BACKLOG)
        except BaseException:
            sock.close()
            raise
        self._socket = sock
        self._stopped = False
        self._subscribe()

    def unbind(self) -> None:
        """Close for good (pysyncobj calls this when the SyncObj is destroyed)."""
        self._stopped = True
        self._close()

    def _subscribe(self) -> None:
        assert self._socket is not None
        self._poller.subscribe(self._socket.fileno(), self._on_event, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)

    def _close(self) -> None:
        sock, self._socket = self._socket, None
        self._paused_until = None
        if sock is not None:
            self._poller.unsubscribe(sock.fileno())
            sock.close()

    def _on_event(self, descr: int, event: int) -> None:
        if self._socket is None or descr != self._socket.fileno():
            self._poller.unsubscribe(descr)
            return
        if event & POLL_EVENT_TYPE.ERROR:
            self._lose("poll reported an error or hang-up on the listening socket")
            return
        for _ in range(ACCEPTS_PER_EVENT):
            try:
                sock, address = self._socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in _ONE_CONNECTION_ERRORS:
                    continue
                if exc.errno in _OUT_OF_RESOURCES:
                    self._pause(exc)
                else:
                    self._lose(f"accept() failed: {exc}")
                return
            self._backoff = 0.0
            self._accepted(sock, address)

    def _accepted(self, sock: socket.socket, address) -> None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_size)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer_size)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = QuorumConnection(self._poller, limits=self._limits, peer=f"{address[0]}:{address[1]}",
                                    socket=sock, timeout=self._connection_timeout,
                                    sendBufferSize=self._send_buffer_size, recvBufferSize=self._recv_buffer_size)
        except OSError:
            sock.close()  # reset by the peer already: nothing to keep
            return
        self._on_new_connection(conn)

    def _pause(self, exc: OSError) -> None:
        assert self._socket is not None
        self._backoff = min(max(self._backoff * 2, self._limits.accept_backoff_min), self._limits.accept_backoff_max)
        self._paused_until = time.monotonic() + self._backoff
        self._poller.unsubscribe(self._socket.fileno())
        _peer_log.warning("quorum.accept_paused", address=self.address, error=str(exc), resume_in_s=self._backoff)

    def _lose(self, reason: str) -> None:
        self._close()
        if self._stopped:
            return
        self._lost_at = time.monotonic()
        self._lost_reason = reason
        self._next_restore = self._lost_at + self._limits.restore_retry
        log.error("quorum.listener_lost", address=self.address, reason=reason,
                  restore_timeout_s=self._limits.restore_timeout)

    def tick(self, now: float) -> None:
        """Resume a paused accept, or bind a lost listener again (or give up)."""
        if self._stopped or self.failed:
            return
        if self._paused_until is not None and now >= self._paused_until and self._socket is not None:
            self._paused_until = None
            self._subscribe()
        if self._lost_at is None or now < self._next_restore:
            return
        try:
            self.bind()
        except OSError as exc:
            if now - self._lost_at < self._limits.restore_timeout:
                self._next_restore = now + self._limits.restore_retry
                return
            self.failed = True
            reason = (f"quorum listener {self.address} lost ({self._lost_reason}) and not bound again within "
                      f"{self._limits.restore_timeout} s (last error: {exc})")
            log.critical("quorum.listener_failed", address=self.address, reason=reason)
            self._on_fatal(reason)
            return
        log.warning("quorum.listener_restored", address=self.address, lost_reason=self._lost_reason,
                    after_s=round(now - self._lost_at, 3))
        self._lost_at = None


class QuorumTransport(TCPTransport):
    """pysyncobj's TCPTransport with `QuorumConnection`s, a `QuorumListener` and pre-auth limits.

    Pass it as `SyncObj(..., transportClass=functools.partial(QuorumTransport, limits=...,
    on_fatal=...))`. `on_fatal(reason)` runs in the tick thread when the listener is lost
    for good; it must be trivial and never raise."""

    def __init__(self, syncObj, selfNode, otherNodes, *, limits: TransportLimits,
                 on_fatal: Callable[[str], None]) -> None:
        if syncObj.encryptor is None:
            raise ValueError("QuorumTransport needs a quorum secret (SyncObjConf password): without one, "
                             "anyone who reaches the port can run code")
        self._limits = limits
        self._on_fatal = on_fatal
        self._pre_auth: list[QuorumConnection] = []  # accepted, not yet authenticated, oldest first
        super().__init__(syncObj, selfNode, otherNodes)

    def _createServer(self):
        conf = self._syncObj.conf
        if conf.bindAddress is not None:
            host, port = conf.bindAddress.rsplit(":", 1)
        elif self._selfNode.address is not None:
            host, port = self._selfNode.address.rsplit(":", 1)
            host = "::" if ":" in host else "0.0.0.0"
        else:
            raise RuntimeError("Unable to determine bind address")
        if host != "0.0.0.0":
            host = globalDnsResolver().resolve(host)
        self._server = QuorumListener(
            self._syncObj._poller, host, port, self._onNewIncomingConnection, limits=self._limits,
            send_buffer_size=conf.sendBufferSize, recv_buffer_size=conf.recvBufferSize,
            connection_timeout=conf.connectionTimeout, on_fatal=self._on_fatal,
        )

    def addNode(self, node):
        # TCPTransport.addNode with QuorumConnection for the connections this node opens.
        self._nodes.add(node)
        self._nodeAddrToNode[node.address] = node
        if self._shouldConnect(node):
            conf = self._syncObj.conf
            conn = QuorumConnection(self._syncObj._poller, limits=self._limits, timeout=conf.connectionTimeout,
                                    sendBufferSize=conf.sendBufferSize, recvBufferSize=conf.recvBufferSize,
                                    keepalive=conf.tcp_keepalive)
            conn.encryptor = self._syncObj.encryptor
            conn.setOnConnectedCallback(lambda: self._onOutgoingConnected(conn))
            conn.setOnMessageReceivedCallback(lambda message: self._onMessageReceived(node, message))
            conn.setOnDisconnectedCallback(lambda: self._onDisconnected(conn))
            self._connections[node] = conn

    def _onNewIncomingConnection(self, conn):
        super()._onNewIncomingConnection(conn)
        self._pre_auth = [c for c in self._pre_auth if self._waiting(c)]
        self._pre_auth.append(conn)
        while len(self._pre_auth) > self._limits.max_pre_auth_connections:
            self._pre_auth.pop(0).refuse(
                f"more than {self._limits.max_pre_auth_connections} connections waiting to authenticate; "
                "closed the oldest")

    def _onIncomingMessageReceived(self, conn, message):
        # The handshake's last step names the peer: a voter's address, or 'readonly' (an
        # observer). Observers are counted and bounded (TransportLimits.max_observers).
        if (message == "readonly" and conn.sendRandKey and conn not in self._connections.values()
                and len(self._readonlyNodes) >= self._limits.max_observers):
            conn.refuse(f"more than {self._limits.max_observers} observers (broker-only nodes) connected")
            self._unknownConnections.discard(conn)
            return
        super()._onIncomingMessageReceived(conn, message)

    def _onDisconnected(self, conn):
        # pysyncobj forgets a disconnected observer but keeps its connection in `_connections`
        # for good: each reconnect of a broker-only node would leak one (and slow every later
        # disconnect, which scans them all).
        node = self._connToNode(conn)
        super()._onDisconnected(conn)
        if node is not None and node not in self._nodes:
            self._connections.pop(node, None)

    @staticmethod
    def _waiting(conn: QuorumConnection) -> bool:
        return not conn.authenticated and conn.state != CONNECTION_STATE.DISCONNECTED

    def _onTick(self):
        super()._onTick()
        now = time.monotonic()
        if self._server is not None:
            self._server.tick(now)
        deadline = now - self._limits.pre_auth_timeout
        for conn in [*self._pre_auth, *self._connections.values()]:
            if isinstance(conn, QuorumConnection) and self._waiting(conn) and conn.opened_at < deadline:
                conn.refuse(f"not authenticated within {self._limits.pre_auth_timeout} s of opening")
        self._pre_auth = [c for c in self._pre_auth if self._waiting(c)]
