"""The internal control channel: brokers call the active controller over CBOR frames.

Frame: 4-byte big-endian length, then a 32-byte HMAC-SHA256 (keyed with the
cluster secret) of the CBOR payload, then the payload. A frame whose MAC does
not verify closes the connection: only nodes that know the cluster secret can
register, heartbeat or change partitions.

Request payload `{"id": n, "method": name, "args": {...}}`; reply
`{"id": n, "ok": result}` or `{"id": n, "error": [kafka error name, message]}`.
Every node listens (on its quorum port + `controller.rpc.port.offset`); a node
that is not the active controller answers NOT_CONTROLLER, naming the one it
knows, so the caller can go there instead.

A broker keeps one connection to the controller and reuses it, so when a
connection that carried a broker's registration or heartbeats ends (EOF,
reset, a bad frame), the controller hears of it (`Controller.connection_lost`)
and probes whether that broker's process is gone: a kill -9 is noticed at once
instead of after a whole session timeout.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import struct
from collections.abc import Callable
from typing import Any

import cbor2
import structlog
import trio

from raftka.raft_meta.controller import Controller, HeartbeatReply, TopicResult
from raftka.raft_meta.controller_decisions import NewTopic
from raftka.raft_meta.controller_errors import KAFKA_ERROR_CODES, ControllerError
from raftka.raft_meta.metadata_loader import MetadataLoader

log = structlog.get_logger("broker.control_rpc")

_LEN = struct.Struct(">I")
MAC_SIZE = 32
MAX_FRAME = 1 << 20
CALL_TIMEOUT_S = 10.0
# Calls that name the broker a connection speaks for (its session).
SESSION_METHODS = frozenset({"register_broker", "heartbeat"})

# A call that waits for a commit until its request's deadline (`timeout_ms`) is given this
# much longer to answer, so the controller's own REQUEST_TIMED_OUT arrives before ours.
DEADLINE_MARGIN_S = 5.0


def topic_results_to_wire(results: list[TopicResult]) -> list[dict]:
    return [{"name": r.name, "error": None if r.error is None else [r.error.name, r.error.message],
             "topic_id": r.topic_id} for r in results]


def topic_results_from_wire(data: list[dict]) -> list[TopicResult]:
    out = []
    for item in data:
        error = item.get("error")
        if error is not None:
            name = error[0] if error[0] in KAFKA_ERROR_CODES else "UNKNOWN_SERVER_ERROR"
            error = ControllerError(name, str(error[1]))
        out.append(TopicResult(str(item["name"]), error, item.get("topic_id")))
    return out


# Method name -> how to turn the controller's result into CBOR-able data.
METHODS: dict[str, Callable[[Any], Any]] = {
    "register_broker": lambda r: r,
    "heartbeat": lambda r: {"fenced": r.fenced, "shutdown_ready": r.shutdown_ready},
    "alter_partition": lambda r: list(r),
    "create_topic": lambda r: r,
    "create_topics": topic_results_to_wire,
    "create_partitions": topic_results_to_wire,
    "delete_topic": lambda r: None,
    "allocate_producer_ids": lambda r: list(r),
}


def _new_topic(data: Any) -> NewTopic:
    def count(value: Any) -> int | None:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"a partition or replica count must be an integer or null, not {value!r}")
        return value

    configs = data.get("configs") or {}
    if not isinstance(data["name"], str) or not isinstance(configs, dict):
        raise TypeError(f"a topic needs a string name and a map of configs: {data!r}")
    return NewTopic(data["name"], count(data.get("num_partitions")), count(data.get("replication_factor")),
                    {str(k): str(v) for k, v in configs.items()})


def _wire_args(method: str, args: dict) -> dict:
    """Rebuild the tuples and records a call's CBOR arguments flattened (TypeError if malformed)."""
    if "listeners" in args:
        args = {**args, "listeners": tuple(tuple(x) for x in args["listeners"])}
    if "new_isr" in args:
        args = {**args, "new_isr": tuple(args["new_isr"])}
    if method == "create_topics":
        args = {**args, "topics": [_new_topic(t) for t in args["topics"]]}
    if method == "create_partitions":
        args = {**args, "totals": [(str(name), int(total)) for name, total in args["totals"]]}
    return args


class RpcProtocolError(Exception):
    """A frame that is too large, unauthenticated or not the expected shape."""


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def encode_frame(secret: bytes, message: dict) -> bytes:
    payload = cbor2.dumps(message)
    return _LEN.pack(MAC_SIZE + len(payload)) + _mac(secret, payload) + payload


async def read_frame(stream: trio.abc.ReceiveStream, buffer: bytearray, secret: bytes) -> dict | None:
    """Read one authenticated frame; None at a clean end of stream."""
    while len(buffer) < 4 or len(buffer) < 4 + _LEN.unpack_from(buffer)[0]:
        if len(buffer) >= 4 and _LEN.unpack_from(buffer)[0] > MAX_FRAME:
            raise RpcProtocolError(f"control frame of {_LEN.unpack_from(buffer)[0]} bytes; expected <= {MAX_FRAME}")
        data = await stream.receive_some(65536)
        if not data:
            if buffer:
                raise RpcProtocolError("connection closed in the middle of a control frame")
            return None
        buffer += data
    size = _LEN.unpack_from(buffer)[0]
    frame = bytes(buffer[4 : 4 + size])
    del buffer[: 4 + size]
    mac, payload = frame[:MAC_SIZE], frame[MAC_SIZE:]
    if len(mac) != MAC_SIZE or not hmac.compare_digest(mac, _mac(secret, payload)):
        raise RpcProtocolError("control frame failed authentication (wrong cluster secret?)")
    try:
        message = cbor2.loads(payload)
    except Exception as exc:
        raise RpcProtocolError(f"control frame is not CBOR: {exc}") from None
    if not isinstance(message, dict):
        raise RpcProtocolError(f"control frame is a {type(message).__name__}; expected a map")
    return message


class ControlRpcServer:
    """Answers control calls with the local controller, when it is the active one."""

    def __init__(self, controller: Controller, loader: MetadataLoader, secret: str) -> None:
        self.controller = controller
        self.loader = loader
        self.secret = secret.encode()

    async def serve(self, host: str, port: int, *,
                    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host or None)
        log.info("control_rpc.listening", host=host, port=port)
        task_status.started(listeners)
        await trio.serve_listeners(self._serve_connection, listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        broker_id: int | None = None  # the broker whose session this connection carries, once known
        try:
            async with stream:
                try:
                    while (message := await read_frame(stream, buffer, self.secret)) is not None:
                        broker_id = _session_broker(message, broker_id)
                        reply = await self._answer(message)
                        await stream.send_all(encode_frame(self.secret, reply))
                except RpcProtocolError as exc:
                    log.warning("control_rpc.connection_closed", error=str(exc), broker_id=broker_id)
                except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
                    pass
        finally:
            # Any end counts (even our own cancellation): the hint only triggers a probe.
            if broker_id is not None:
                self.controller.connection_lost(broker_id)

    async def _answer(self, message: dict) -> dict:
        call_id = message.get("id")
        method = message.get("method")
        args = message.get("args") or {}
        convert = METHODS.get(method) if isinstance(method, str) else None
        if convert is None or not isinstance(args, dict):
            return {"id": call_id, "error": ["INVALID_REQUEST", f"unknown control method {method!r}"]}
        if self.loader.active_controller_epoch() is None:
            return {"id": call_id, "error": ["NOT_CONTROLLER",
                                             f"not the active controller; try node {self.loader.image.controller.node_id}"]}
        try:
            try:
                args = _wire_args(method, args)
            except (KeyError, ValueError, AttributeError) as exc:
                raise TypeError(f"malformed arguments: {exc!r}") from None
            result = await getattr(self.controller, method)(**args)
            return {"id": call_id, "ok": convert(result)}
        except ControllerError as exc:
            return {"id": call_id, "error": [exc.name, exc.message]}
        except TypeError as exc:
            return {"id": call_id, "error": ["INVALID_REQUEST", f"bad arguments for {method}: {exc}"]}


def _session_broker(message: dict, current: int | None) -> int | None:
    """The broker id a register/heartbeat call names, else `current`."""
    args = message.get("args")
    if message.get("method") in SESSION_METHODS and isinstance(args, dict):
        broker_id = args.get("broker_id")
        if isinstance(broker_id, int) and not isinstance(broker_id, bool):
            return broker_id
    return current


class ControlRpcClient:
    """Calls one remote node's control RPC; one call at a time, reconnecting as needed."""

    def __init__(self, address: tuple[str, int], secret: str) -> None:
        self.address = address
        self.secret = secret.encode()
        self._stream: trio.SocketStream | None = None
        self._buffer = bytearray()
        self._lock = trio.Lock()
        self._ids = itertools.count(1)

    async def call(self, method: str, **args: Any) -> Any:
        """One call; its reply's result, or the ControllerError it answered. A call with a
        `timeout_ms` argument waits that long (plus DEADLINE_MARGIN_S) for the answer."""
        timeout_ms = args.get("timeout_ms")
        wait_s = CALL_TIMEOUT_S
        if isinstance(timeout_ms, int) and timeout_ms > 0:
            wait_s = max(CALL_TIMEOUT_S, timeout_ms / 1000.0 + DEADLINE_MARGIN_S)
        deadline = trio.current_time() + wait_s  # waiting for an earlier call counts too
        async with self._lock:
            try:
                with trio.fail_at(deadline):
                    if self._stream is None:
                        self._stream = await trio.open_tcp_stream(*self.address)
                        self._buffer = bytearray()
                    call_id = next(self._ids)
                    await self._stream.send_all(encode_frame(self.secret, {"id": call_id, "method": method,
                                                                             "args": args}))
                    reply = await read_frame(self._stream, self._buffer, self.secret)
            except trio.Cancelled:
                await self.aclose()  # a reply may be half read: never reuse this stream
                raise
            except trio.TooSlowError:
                await self.aclose()
                raise ControllerError("REQUEST_TIMED_OUT",
                                      f"control call {method} to {self.address[0]}:{self.address[1]}: no answer "
                                      f"within {wait_s:g} s; its outcome is unknown") from None
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, RpcProtocolError) as exc:
                await self.aclose()
                raise ControllerError("NOT_CONTROLLER",
                                      f"control call {method} to {self.address[0]}:{self.address[1]} failed: "
                                      f"{exc!r}") from None
            if reply is None or reply.get("id") != call_id:
                await self.aclose()
                raise ControllerError("NOT_CONTROLLER", f"control call {method}: connection lost")
        if "error" in reply:
            name, message = reply["error"]
            if name not in KAFKA_ERROR_CODES:
                name = "UNKNOWN_SERVER_ERROR"
            raise ControllerError(name, str(message))
        return reply.get("ok")

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


def heartbeat_reply(data: dict) -> HeartbeatReply:
    return HeartbeatReply(fenced=bool(data["fenced"]), shutdown_ready=bool(data["shutdown_ready"]))
