"""One trio TCP connection to one broker: negotiate versions, then pipeline requests.

Requests are written in the order `request()` is called and Kafka answers
them in the same order on one connection, so waiting requests sit in a FIFO
and each response frame is matched to the head (its correlation id is
checked: a mismatch means the stream is confused and the connection dies).
Produce with acks=0 gets no response and never enters the FIFO.

A request that times out raises KafkaTimeoutError; its slot stays in the
FIFO so the late response, when it comes, is read and dropped (Kafka would
close the connection; keeping it is cheaper and equally correct). When the
socket fails or closes, every waiting request fails with KafkaConnectionError.

The reader task runs in a nursery the caller owns (the cluster's).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import trio

from raftka.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for_code
from raftka.client.protocol import (
    ApiKey,
    ApiVersionsRequest,
    ErrorCode,
    FrameDecoder,
    Message,
    ProtocolError,
    decode_response,
    encode_request,
    peek_correlation_id,
)
from raftka.client.protocol.scram import ScramClient, ScramError
from raftka.client.sdk_log import get_logger
from raftka.client.security import ClientSecurity
from raftka.client.tls import drain_tls
from raftka.client.versions import API_VERSIONS_FIRST_TRY, choose_versions, version_for

log = get_logger("raftka.client.connection")

_RECV_SIZE = 1 << 16
DEFAULT_MAX_RESPONSE_SIZE = 200 << 20


@dataclass(eq=False)
class _Pending:
    correlation_id: int
    api_key: ApiKey
    api_version: int
    done: trio.Event = field(default_factory=trio.Event)
    response: Message | None = None
    error: BaseException | None = None
    abandoned: bool = False


def _tls_refusal(cause: BaseException | None) -> bool:
    """Whether a failed handshake's cause is a TLS refusal (a certificate, a protocol version),
    not the peer hanging up (EOF) or a reset."""
    import ssl

    return isinstance(cause, ssl.SSLError) and not isinstance(cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError))


async def speaks_tls(host: str, port: int, timeout: float = 3.0) -> bool:
    """Whether `host:port` answers a TLS client hello with TLS (a handshake, or a TLS alert such as
    a refused client certificate). Nothing is verified and nothing is sent after the handshake;
    used only to word an error."""
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with trio.move_on_after(timeout):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:
            return False
        tls = trio.SSLStream(stream, context, server_hostname=host)
        try:
            await tls.do_handshake()
            return True
        except trio.BrokenResourceError as exc:  # EOF or a reset: it hung up on TLS too
            return _tls_refusal(exc.__cause__)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
    return False


class BrokerConnection:
    """A connected, version-negotiated link to one broker. Build with `connect()`."""

    def __init__(self, stream: trio.SocketStream, host: str, port: int, *,
                 client_id: str, request_timeout: float, node_id: int | None = None) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions: dict[ApiKey, int] = {}
        self._stream = stream
        self._tls = isinstance(stream, trio.SSLStream)
        self._decoder = FrameDecoder(DEFAULT_MAX_RESPONSE_SIZE)
        self._pending: deque[_Pending] = deque()
        self._send_lock = trio.Lock()
        self._correlation = itertools.count(1)
        self._closed = False
        self._close_reason: str | None = None
        self._refused = False  # closed by a TLS refusal (_fail_all)
        self._reader_scope: trio.CancelScope | None = None

    # --- lifecycle -------------------------------------------------------
    @classmethod
    async def connect(cls, nursery: trio.Nursery, host: str, port: int, *,
                      client_id: str = "raftka-python", request_timeout: float = 30.0,
                      connect_timeout: float = 10.0, node_id: int | None = None,
                      security: ClientSecurity | None = None,
                      ) -> BrokerConnection:
        """Open a TCP connection (TLS when `security` says so), start its reader in `nursery`,
        negotiate API versions and authenticate (SASL). Raises KafkaConnectionError if the
        broker is unreachable or the negotiation or TLS handshake fails, and
        SaslAuthenticationFailedError (a KafkaError) when the credentials are refused."""
        where = f"broker {host}:{port}{'' if node_id is None else f' (node {node_id})'}"
        try:
            with trio.fail_after(connect_timeout):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise KafkaConnectionError(f"cannot connect to {where}: {exc or 'timed out'}") from exc
        if security is not None and security.uses_ssl:
            stream = trio.SSLStream(stream, security.ssl_context(), server_hostname=host)
            try:
                with trio.fail_after(connect_timeout):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError) as exc:
                with trio.CancelScope(shield=True):
                    await stream.transport_stream.aclose()
                # A certificate or protocol refusal is the configuration's, not a broker that is
                # down: not retriable, so a client waiting for the cluster says so at once.
                raise KafkaConnectionError(
                    f"TLS handshake with {where} failed: {exc.__cause__ or exc or 'timed out'}",
                    retriable=not _tls_refusal(exc.__cause__)) from exc
        conn = cls(stream, host, port, client_id=client_id, request_timeout=request_timeout,
                   node_id=node_id)
        await nursery.start(conn._reader)
        try:
            await conn._negotiate()
            if security is not None and security.uses_sasl:
                await conn._authenticate(security)
        except BaseException:
            await conn.aclose()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered (abandoned ones included)."""
        return len(self._pending)

    async def aclose(self) -> None:
        """Close the socket; waiting requests fail with KafkaConnectionError."""
        self._fail_all("connection closed by the client")
        if self._reader_scope is not None:
            self._reader_scope.cancel()
        with trio.CancelScope(shield=True):
            await self._stream.aclose()

    def __repr__(self) -> str:
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port})"

    # --- negotiation -----------------------------------------------------
    async def _negotiate(self) -> None:
        version = API_VERSIONS_FIRST_TRY
        try:
            response = await self._send(ApiKey.API_VERSIONS, version, ApiVersionsRequest(),
                                        expect_response=True)
        except KafkaConnectionError as exc:
            if self._refused:  # TLS 1.3: the broker's alert came after the client's handshake
                raise KafkaConnectionError(
                    f"the broker {self.host}:{self.port} refused this client's TLS handshake: "
                    f"{self._close_reason} (a client certificate it does not accept, or none where it "
                    "requires one)", retriable=False) from exc
            # Hung up on before any answer: a TLS listener spoken to in plaintext (it answers a
            # TLS hello, so ask it one), or not a Kafka listener at all, such as a raftka
            # node's metadata-quorum or controller port.
            if not self._tls and await speaks_tls(self.host, self.port):
                raise KafkaConnectionError(
                    f"{exc.message} — {self.host}:{self.port} is a TLS listener and this client spoke "
                    "plaintext: it may need TLS/SASL settings (raftka's CLI: --command-config "
                    "client.properties; the SDK: security=ClientSecurity(...))", retriable=False) from exc
            raise KafkaConnectionError(
                f"{exc.message} — is {self.host}:{self.port} a Kafka listener? It hung up on the first "
                "request, as a raftka node's controller ports do (quorum: client port + 1, "
                "controller RPC: client port + 2; clients use the client port, 9092 by default)"
            ) from exc
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The broker answered in the v0 layout; its own range for
            # ApiVersions is in api_keys (KIP-511), but v0 always works.
            version = 0
            response = await self._send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(),
                                        expect_response=True)
        if response.error_code:
            raise error_for_code(response.error_code,
                                 f"ApiVersions v{version} to {self.host}:{self.port} failed")
        broker = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        self.versions = choose_versions(broker)
        log.debug("connection.negotiated", broker=f"{self.host}:{self.port}",
                  versions={k.name: v for k, v in self.versions.items()})

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds (PLAIN: one; SCRAM: two)."""
        mechanism = security.sasl_mechanism
        assert mechanism is not None and security.sasl_username is not None
        handshake = await self._send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}, expect_response=True)
        if handshake.error_code:
            raise error_for_code(handshake.error_code,
                                 f"SASL mechanism {mechanism} refused by {self.host}:{self.port}; "
                                 f"it enables {list(handshake.mechanisms)}")
        version = self.version(ApiKey.SASL_AUTHENTICATE)

        async def round_trip(token: bytes) -> bytes:
            reply = await self._send(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}, expect_response=True)
            if reply.error_code:
                raise error_for_code(reply.error_code, f"SASL {mechanism} authentication as "
                                                       f"{security.sasl_username!r} to {self.host}:{self.port} "
                                                       f"failed: {reply.error_message}")
            return bytes(reply.auth_bytes)

        if mechanism == "PLAIN":
            await round_trip(f"\0{security.sasl_username}\0{security.sasl_password}".encode())
            return
        scram = ScramClient(mechanism, security.sasl_username, security.sasl_password or "")
        try:
            final = await round_trip(scram.client_final(await round_trip(scram.client_first())))
            scram.verify_server_final(final)
        except ScramError as exc:
            raise KafkaConnectionError(f"SCRAM with {self.host}:{self.port} failed: {exc}") from None

    # --- requests --------------------------------------------------------
    def version(self, api_key: ApiKey) -> int:
        """The negotiated version for `api_key` (UnsupportedVersionError if none)."""
        return version_for(self.versions, api_key)

    async def request(self, api_key: ApiKey, body: Message | dict[str, Any], *,
                      version: int | None = None, expect_response: bool = True,
                      timeout: float | None = None) -> Message | None:
        """Send one request and wait for its response (None when `expect_response`
        is False, as for acks=0 produce). Raises KafkaConnectionError,
        KafkaTimeoutError, or UnsupportedVersionError."""
        if version is None:
            version = self.version(api_key)
        return await self._send(api_key, version, body, expect_response=expect_response,
                                timeout=timeout)

    async def _send(self, api_key: ApiKey, version: int, body: Any, *,
                    expect_response: bool, timeout: float | None = None) -> Any:
        if self._closed:
            raise KafkaConnectionError(
                f"connection to {self.host}:{self.port} is closed: {self._close_reason}",
                retriable=not self._refused)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, body, client_id=self.client_id)
        pending = _Pending(correlation_id, api_key, version)
        timeout = self.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + (math.inf if timeout is None else timeout)
        # Partial writes would corrupt the stream for everyone: the enqueue and
        # the write happen together, shielded, bounded by the request deadline.
        with trio.CancelScope(shield=True, deadline=deadline) as scope:
            async with self._send_lock:
                if expect_response:
                    self._pending.append(pending)
                try:
                    await self._stream.send_all(frame)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._fail_all(f"send failed: {exc!r}", refused=_tls_refusal(exc.__cause__))
                    raise KafkaConnectionError(
                        f"sending {api_key.name} to {self.host}:{self.port} failed: {exc!r}",
                        retriable=not self._refused) from exc
        if scope.cancelled_caught:
            self._fail_all("send timed out; the stream may hold a partial frame")
            await self.aclose()
            raise KafkaTimeoutError(
                f"sending {api_key.name} to {self.host}:{self.port} took over {timeout}s")
        if not expect_response:
            return None
        try:
            with trio.move_on_at(deadline):
                await pending.done.wait()
        finally:
            if not pending.done.is_set():
                pending.abandoned = True  # timed out or cancelled: drop the late answer
        if not pending.done.is_set():
            pending.abandoned = True
            raise KafkaTimeoutError(
                f"{api_key.name} v{version} to {self.host}:{self.port} got no response within "
                f"{timeout}s (correlation id {correlation_id})")
        if pending.error is not None:
            raise pending.error
        return pending.response

    # --- reader ----------------------------------------------------------
    async def _reader(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                      ) -> None:
        with trio.CancelScope() as scope:
            self._reader_scope = scope
            task_status.started()
            try:
                while True:
                    chunk = await self._stream.receive_some(_RECV_SIZE)
                    if chunk and self._tls:
                        chunk += drain_tls(self._stream, _RECV_SIZE)  # records already received
                    if not chunk:
                        self._decoder.eof()
                        self._fail_all("the broker closed the connection")
                        return
                    for frame in self._decoder.feed(chunk):
                        self._dispatch(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                # TLS 1.3: a broker refusing the client's certificate (or its lack of one) says
                # so in an alert after the client's side of the handshake has finished.
                refused = _tls_refusal(exc.__cause__)
                self._fail_all(f"receive failed: {exc.__cause__ if refused else repr(exc)}", refused=refused)
            except (ProtocolError, KafkaError) as exc:
                self._fail_all(f"bad response stream: {exc}")
                log.warning("connection.bad_response", broker=f"{self.host}:{self.port}",
                            error=str(exc))
        if self._closed:
            with trio.CancelScope(shield=True):
                await self._stream.aclose()

    def _dispatch(self, frame: bytes) -> None:
        correlation_id = peek_correlation_id(frame)
        if not self._pending:
            raise KafkaConnectionError(
                f"response with correlation id {correlation_id} but no request is waiting")
        pending = self._pending.popleft()
        if pending.correlation_id != correlation_id:
            raise KafkaConnectionError(
                f"response correlation id {correlation_id} does not match the oldest "
                f"request's {pending.correlation_id} ({pending.api_key.name})")
        if pending.abandoned:
            return
        try:
            _, pending.response = decode_response(pending.api_key, pending.api_version, frame)
        except ProtocolError as exc:
            pending.error = KafkaConnectionError(
                f"undecodable {pending.api_key.name} v{pending.api_version} response: {exc}")
        pending.done.set()

    def _fail_all(self, reason: str, *, refused: bool = False) -> None:
        """Close the connection and fail what waits; `refused`: a TLS refusal (a certificate, a
        protocol) closed it, which trying again will not change, so the errors are not retriable."""
        if not self._closed:
            self._closed = True
            self._close_reason = reason
            self._refused = refused
        while self._pending:
            pending = self._pending.popleft()
            if not pending.done.is_set():
                pending.error = KafkaConnectionError(
                    f"{pending.api_key.name} to {self.host}:{self.port} lost: {reason}",
                    retriable=not self._refused)
                pending.done.set()
