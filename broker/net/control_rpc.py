"""The internal control channel: brokers call the active controller over CBOR frames.

Every frame is a 4-byte big-endian length and then its body. A connection starts with
an unauthenticated hello each way: `b"RKC2"` and a fresh 16-byte random nonce, the
client's first. Every later frame is a 32-byte MAC and a CBOR payload:

    cluster key = scrypt(controller.quorum.secret, salt = "raftka control-rpc v2" + cluster id,
                         n=2**14, r=8, p=1)                       once per process
    session key = HMAC-SHA256(cluster key, "raftka control session" + client nonce + server nonce)
    MAC         = HMAC-SHA256(session key, direction + sequence number (8 bytes) + length + payload)

So the MAC covers the whole frame. It cannot be replayed on another connection (the other
side's nonce differs, and so does the session key) or on the same one (the sequence number
has moved on), nor reflected back to its sender (the direction differs). No clocks are
involved. A frame whose MAC does not verify closes the connection. Only nodes that know
the cluster secret can register, heartbeat or change partitions, and replies are
authenticated the same way.
The slow key derivation makes each offline guess of the secret from a captured frame
cost one scrypt (~50 ms of a core, 16 MiB) instead of one HMAC. It runs once per process,
in a worker thread; a connection costs two HMACs.

Request payload `{"id": n, "method": name, "args": {...}}`; reply `{"id": n, "ok": result}`
or `{"id": n, "error": [kafka error name, message]}`. Arguments are checked against each
method's signature (`SIGNATURES`) before the controller sees them. Any failure of a
handler, expected or not, is answered as an error and never ends the process.

Every node listens (on its quorum port + `controller.rpc.port.offset`); a node that is
not the active controller answers NOT_CONTROLLER, naming the one it knows, so the caller
can go there instead. A connection must say hello and send its first authenticated frame
(at most `PRE_AUTH_MAX_FRAME` bytes) within `HANDSHAKE_TIMEOUT_S`; at most
`MAX_HANDSHAKES` connections may be at that stage (the oldest is dropped).

A broker keeps one connection to the controller and reuses it, so when a
connection that carried a broker's registration or heartbeats ends (EOF,
reset, a bad frame), the controller hears of it (`Controller.connection_lost`)
and probes whether that broker's process is gone: a kill -9 is noticed at once
instead of after a whole session timeout.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import itertools
import os
import struct
from collections.abc import Callable
from typing import Any

import cbor2
import structlog
import trio

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import check_secret
from raftka.raft_meta.controller.config_decisions import AlterResource, ConfigOp
from raftka.raft_meta.controller.controller import Controller, HeartbeatReply, TopicResult
from raftka.raft_meta.controller.controller_decisions import NewTopic
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader

log = structlog.get_logger("broker.control_rpc")

_LEN = struct.Struct(">I")
_SEQUENCE = struct.Struct(">Q")
MAC_SIZE = 32
MAX_FRAME = 1 << 20
PRE_AUTH_MAX_FRAME = 64 * 1024  # the first authenticated frame: a registration, a heartbeat, ...
CALL_TIMEOUT_S = 10.0
HANDSHAKE_TIMEOUT_S = 10.0
MAX_HANDSHAKES = 64

HELLO_MAGIC = b"RKC2"
NONCE_SIZE = 16
HELLO_SIZE = len(HELLO_MAGIC) + NONCE_SIZE
_CLIENT, _SERVER = b"C", b"S"  # the direction of a frame, under its MAC

# scrypt's "interactive" cost (RFC 7914 section 2; ~50 ms and 16 MiB here).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
KEY_SALT_PREFIX = b"raftka control-rpc v2\x00"

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
            error = ControllerError.named(error[0], str(error[1]))
        out.append(TopicResult(str(item["name"]), error, item.get("topic_id")))
    return out


def errors_to_wire(errors: list[ControllerError | None]) -> list[list[str] | None]:
    return [None if e is None else [e.name, e.message] for e in errors]


def errors_from_wire(data: list) -> list[ControllerError | None]:
    out: list[ControllerError | None] = []
    for error in data:
        if error is None:
            out.append(None)
        else:
            out.append(ControllerError.named(error[0], str(error[1])))
    return out


def election_results_to_wire(results: list) -> list:
    return [[name, index, None if e is None else [e.name, e.message]] for name, index, e in results]


def election_results_from_wire(data: list) -> list[tuple[str, int, ControllerError | None]]:
    errors = errors_from_wire([error for _, _, error in data])
    return [(str(name), int(index), error) for (name, index, _), error in zip(data, errors, strict=True)]


def new_topic_to_wire(topic: NewTopic) -> dict:
    wire = {"name": topic.name, "num_partitions": topic.num_partitions,
            "replication_factor": topic.replication_factor, "configs": dict(topic.configs)}
    if topic.assignments is not None:
        wire["assignments"] = [[index, list(replicas)] for index, replicas in sorted(topic.assignments.items())]
    return wire


def alter_resource_to_wire(resource: AlterResource) -> dict:
    return {"type": resource.resource_type, "name": resource.resource_name, "incremental": resource.incremental,
            "ops": [[op.name, op.value, op.op] for op in resource.ops]}


def _alter_resource(data: Any) -> AlterResource:
    return AlterResource(str(data["type"]), str(data["name"]),
                         tuple(ConfigOp(str(n), None if v is None else str(v), int(o)) for n, v, o in data["ops"]),
                         bool(data["incremental"]))


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
    "create_acls": lambda r: r,
    "delete_acls": lambda r: r,
    "alter_configs": errors_to_wire,
    "elect_leaders": election_results_to_wire,
    "alter_scram_credentials": lambda results: [[r.user, r.error, r.message] for r in results],
    "alter_client_quotas": lambda results: [[[list(c) for c in r.components], r.error, r.message] for r in results],
    "alter_partition_reassignments": lambda r: r,
    "unregister_broker": lambda r: None,
}


def _new_topic(data: Any) -> NewTopic:
    def count(value: Any) -> int | None:
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"a partition or replica count must be an integer or null, not {value!r}")
        return value

    configs = data.get("configs") or {}
    if not isinstance(data["name"], str) or not isinstance(configs, dict):
        raise TypeError(f"a topic needs a string name and a map of configs: {data!r}")
    assignments = data.get("assignments")
    if assignments is not None:
        assignments = {int(index): tuple(int(b) for b in replicas) for index, replicas in assignments}
    return NewTopic(data["name"], count(data.get("num_partitions")), count(data.get("replication_factor")),
                    {str(k): str(v) for k, v in configs.items()}, assignments)


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
        if args.get("assignments") is not None:
            args["assignments"] = {str(name): [tuple(int(b) for b in r) for r in lists]
                                   for name, lists in args["assignments"].items()}
    if method == "elect_leaders" and args.get("partitions") is not None:
        args = {**args, "partitions": [(str(name), int(index)) for name, index in args["partitions"]]}
    if method == "alter_configs":
        args = {**args, "resources": [_alter_resource(r) for r in args["resources"]]}
    if method == "alter_scram_credentials":
        from raftka.raft_meta.security.scram_decisions import ScramUpsertion

        args = {"deletions": [(str(n), int(m)) for n, m in args["deletions"]],
                "upsertions": [ScramUpsertion(str(n), int(m), int(i), bytes(s), bytes(k1), bytes(k2))
                               for n, m, i, s, k1, k2 in args["upsertions"]]}
    if method == "alter_client_quotas":
        from raftka.raft_meta.controller.quota_decisions import QuotaAlteration

        args = {**args, "alterations": [
            QuotaAlteration(tuple((str(t), None if n is None else str(n)) for t, n in components),
                            tuple((str(k), None if v is None else float(v)) for k, v in ops))
            for components, ops in args["alterations"]]}
    return args


class RpcProtocolError(Exception):
    """A frame that is too large, unauthenticated or not the expected shape."""


# --- keys -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def derive_cluster_key(secret: str, cluster_id: str) -> bytes:
    """The control RPC's long-term key: slow on purpose (see the module docstring). Blocking."""
    problem = check_secret(secret)
    if problem is not None:
        raise ValueError(problem)
    return hashlib.scrypt(secret.encode("utf-8"), salt=KEY_SALT_PREFIX + cluster_id.encode("utf-8"),
                          n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32, maxmem=64 << 20)


async def cluster_key(secret: str, cluster_id: str) -> bytes:
    """`derive_cluster_key` off the event loop (cached: only the first call costs)."""
    return await trio.to_thread.run_sync(derive_cluster_key, secret, cluster_id)


# --- the sans-IO part: hellos and sealed frames ---------------------------------------------


def encode_hello(nonce: bytes) -> bytes:
    return _LEN.pack(HELLO_SIZE) + HELLO_MAGIC + nonce


def parse_hello(body: bytes) -> bytes:
    """The peer's nonce from its hello frame's body."""
    if len(body) != HELLO_SIZE or not body.startswith(HELLO_MAGIC):
        raise RpcProtocolError(f"expected a control hello ({HELLO_MAGIC!r} and a {NONCE_SIZE}-byte nonce); got "
                               f"{len(body)} bytes starting {body[:4]!r} (an older raftka, or not a raftka node)")
    return body[len(HELLO_MAGIC):]


class ControlSession:
    """One side of one control connection, after the hellos: seals and opens frames."""

    def __init__(self, cluster_key: bytes, client_nonce: bytes, server_nonce: bytes, *, is_client: bool) -> None:
        self._key = hmac.new(cluster_key, b"raftka control session" + client_nonce + server_nonce,
                             hashlib.sha256).digest()
        self._send_direction, self._receive_direction = (_CLIENT, _SERVER) if is_client else (_SERVER, _CLIENT)
        self._sent = 0
        self._received = 0

    def _mac(self, direction: bytes, sequence: int, prefix: bytes, payload: bytes) -> bytes:
        return hmac.new(self._key, direction + _SEQUENCE.pack(sequence) + prefix + payload, hashlib.sha256).digest()

    def seal(self, message: dict) -> bytes:
        payload = cbor2.dumps(message)
        prefix = _LEN.pack(MAC_SIZE + len(payload))
        mac = self._mac(self._send_direction, self._sent, prefix, payload)
        self._sent += 1
        return prefix + mac + payload

    def open(self, body: bytes) -> dict:
        """Verify and decode one frame's body (the bytes after its length)."""
        mac, payload = body[:MAC_SIZE], body[MAC_SIZE:]
        expected = self._mac(self._receive_direction, self._received, _LEN.pack(len(body)), payload)
        if len(mac) != MAC_SIZE or not hmac.compare_digest(mac, expected):
            raise RpcProtocolError("control frame failed authentication (wrong cluster secret, or a replayed frame)")
        self._received += 1
        try:
            message = cbor2.loads(payload)
        except Exception as exc:  # noqa: BLE001 - cbor2 raises several types
            raise RpcProtocolError(f"control frame is not CBOR: {exc}") from None
        if not isinstance(message, dict):
            raise RpcProtocolError(f"control frame is a {type(message).__name__}; expected a map")
        return message


async def read_frame(stream: trio.abc.ReceiveStream, buffer: bytearray, limit: int) -> bytes | None:
    """One frame's body (at most `limit` bytes, refused before buffering); None at a clean end."""
    while len(buffer) < 4 or len(buffer) < 4 + _LEN.unpack_from(buffer)[0]:
        if len(buffer) >= 4 and _LEN.unpack_from(buffer)[0] > limit:
            raise RpcProtocolError(f"control frame of {_LEN.unpack_from(buffer)[0]} bytes; expected <= {limit}")
        data = await stream.receive_some(65536)
        if not data:
            if buffer:
                raise RpcProtocolError("connection closed in the middle of a control frame")
            return None
        buffer += data
    size = _LEN.unpack_from(buffer)[0]
    if size > limit:
        raise RpcProtocolError(f"control frame of {size} bytes; expected <= {limit}")
    body = bytes(buffer[4: 4 + size])
    del buffer[: 4 + size]
    return body


# --- argument checking ------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _is_str(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 65536


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _list_of(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, (list, tuple)) and len(value) <= 65536 and all(map(check, value))


def _is_listener(value: object) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 3 and _is_str(value[0]) and _is_str(value[1])
            and _is_int(value[2]))


def _is_configs(value: object) -> bool:
    return isinstance(value, dict) and all(_is_str(k) and _is_str(v) for k, v in value.items())


def _is_replicas(value: object) -> bool:
    return _list_of(_is_int)(value)


def _is_indexed_replicas(value: object) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and _is_int(value[0]) and _is_replicas(value[1])


def _is_new_topic(value: object) -> bool:
    return (isinstance(value, dict)
            and set(value) <= {"name", "num_partitions", "replication_factor", "configs", "assignments"}
            and _is_str(value.get("name")) and _optional(_is_int)(value.get("num_partitions"))
            and _optional(_is_int)(value.get("replication_factor"))
            and _optional(_is_configs)(value.get("configs"))
            and _optional(_list_of(_is_indexed_replicas))(value.get("assignments")))


def _is_partition_assignments(value: object) -> bool:
    return isinstance(value, dict) and all(_is_str(k) and _list_of(_is_replicas)(v) for k, v in value.items())


def _is_config_op(value: object) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 3 and _is_str(value[0])
            and _optional(_is_str)(value[1]) and _is_int(value[2]))


def _is_alter_resource(value: object) -> bool:
    return (isinstance(value, dict) and set(value) == {"type", "name", "incremental", "ops"}
            and _is_str(value["type"]) and _is_str(value["name"]) and isinstance(value["incremental"], bool)
            and _list_of(_is_config_op)(value["ops"]))


def _is_total(value: object) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and _is_str(value[0]) and _is_int(value[1])


def _is_acl(value: object, optional_strings: bool = False) -> bool:
    text = _optional(_is_str) if optional_strings else _is_str
    return (isinstance(value, (list, tuple)) and len(value) == 7 and _is_int(value[0]) and text(value[1])
            and _is_int(value[2]) and text(value[3]) and text(value[4]) and _is_int(value[5])
            and _is_int(value[6]))


def _is_acl_filter(value: object) -> bool:
    return _is_acl(value, optional_strings=True)


def _is_reassignment(value: object) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 3 and _is_str(value[0]) and _is_int(value[1])
            and _optional(_list_of(_is_int))(value[2]))


_INT, _STR = (_is_int, "an integer"), (_is_str, "a string")
_OPT_INT, _OPT_STR = (_optional(_is_int), "an integer or null"), (_optional(_is_str), "a string or null")
_BOOL = (lambda v: isinstance(v, bool), "true or false")

# method -> {argument: ((check, what is expected), required)}
SIGNATURES: dict[str, dict[str, tuple[tuple[Callable[[object], bool], str], bool]]] = {
    "register_broker": {"broker_id": (_INT, True), "incarnation_id": (_STR, True),
                        "listeners": ((_list_of(_is_listener), "a list of [name, host, port]"), True),
                        "rack": (_OPT_STR, True)},
    "heartbeat": {"broker_id": (_INT, True), "broker_epoch": (_INT, True), "metadata_offset": (_INT, True),
                  "want_shutdown": (_BOOL, False)},
    "alter_partition": {"broker_id": (_INT, True), "broker_epoch": (_INT, True), "topic_id": (_STR, True),
                        "partition": (_INT, True), "leader_epoch": (_INT, True), "partition_epoch": (_INT, True),
                        "new_isr": ((_list_of(_is_int), "a list of broker ids"), True)},
    "create_topic": {"name": (_STR, True), "num_partitions": (_OPT_INT, False),
                     "replication_factor": (_OPT_INT, False),
                     "configs": ((_optional(_is_configs), "a map of string to string, or null"), False),
                     "request_id": (_OPT_STR, False), "timeout_ms": (_OPT_INT, False)},
    "create_topics": {"topics": ((_list_of(_is_new_topic), "a list of {name, num_partitions, "
                                  "replication_factor, configs}"), True),
                      "timeout_ms": (_OPT_INT, False)},
    "create_partitions": {"totals": ((_list_of(_is_total), "a list of [name, total]"), True),
                          "timeout_ms": (_OPT_INT, False),
                          "assignments": ((_optional(_is_partition_assignments),
                                           "a map of topic to lists of broker ids, or null"), False)},
    "elect_leaders": {"election_type": (_INT, True),
                      "partitions": ((_optional(_list_of(_is_total)), "a list of [topic, partition], or null"), True),
                      "timeout_ms": (_OPT_INT, False)},
    "alter_configs": {"resources": ((_list_of(_is_alter_resource), "a list of {type, name, incremental, ops}"),
                                    True),
                      "timeout_ms": (_OPT_INT, False)},
    "delete_topic": {"name": (_STR, True), "request_id": (_OPT_STR, False), "timeout_ms": (_OPT_INT, False)},
    "allocate_producer_ids": {"broker_id": (_INT, True), "broker_epoch": (_INT, True)},
    "create_acls": {"acls": ((_list_of(_is_acl), "a list of [type, name, pattern, principal, host, "
                                                  "operation, permission]"), True)},
    "delete_acls": {"filters": ((_list_of(_is_acl_filter), "a list of [type, name|null, pattern, "
                                                           "principal|null, host|null, operation, permission]"),
                                True)},
    "alter_scram_credentials": {
        "deletions": ((_list_of(lambda v: isinstance(v, (list, tuple)) and len(v) == 2), "a list of [user, mechanism]"),
                      True),
        "upsertions": ((_list_of(lambda v: isinstance(v, (list, tuple)) and len(v) == 6),
                        "a list of [user, mechanism, iterations, salt, stored key, server key]"), True)},
    "alter_client_quotas": {
        "alterations": ((_list_of(lambda v: isinstance(v, (list, tuple)) and len(v) == 2),
                         "a list of [[[entity type, name|null], ...], [[key, value|null], ...]]"), True),
        "validate_only": (_BOOL, False)},
    "alter_partition_reassignments": {
        "reassignments": ((_list_of(_is_reassignment), "a list of [topic, partition, replicas|null]"), True),
        "allow_rf_change": (_BOOL, False), "timeout_ms": (_OPT_INT, False)},
    "unregister_broker": {"broker_id": (_INT, True)},
}
assert SIGNATURES.keys() == METHODS.keys()


def check_arguments(method: str, args: dict) -> str | None:
    """Why `args` do not fit `method`'s signature, else None."""
    signature = SIGNATURES[method]
    unknown = sorted(str(name) for name in args if name not in signature)
    if unknown:
        return f"unknown arguments {unknown} for {method}; expected {sorted(signature)}"
    for name, ((check, expected), required) in signature.items():
        if name not in args:
            if required:
                return f"argument {name!r} of {method} is missing"
            continue
        if not check(args[name]):
            return f"argument {name!r} of {method} is a {type(args[name]).__name__}; expected {expected}"
    return None


# --- the trio shells --------------------------------------------------------------------


class ControlRpcServer:
    """Answers control calls with the local controller, when it is the active one."""

    def __init__(self, controller: Controller, loader: MetadataLoader, secret: str) -> None:
        self.controller = controller
        self.loader = loader
        self._secret = secret
        self._key: bytes | None = None
        self._handshaking: dict[int, trio.CancelScope] = {}  # connection number -> its scope, oldest first
        self._numbers = itertools.count()

    async def serve(self, host: str, port: int, *,
                    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED) -> None:
        self._key = await cluster_key(self._secret, self.loader.cluster_id)
        listeners = await trio.open_tcp_listeners(port, host=host or None)
        log.info("control_rpc.listening", host=host, port=port)
        task_status.started(listeners)
        await trio.serve_listeners(self._serve_connection, listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        broker_id: int | None = None  # the broker whose session this connection carries, once known
        try:
            async with stream:
                try:
                    handshake = await self._handshake(stream)
                    if handshake is None:
                        return
                    session, buffer, message = handshake
                    while message is not None:
                        broker_id = _session_broker(message, broker_id)
                        reply = await self._answer(message)
                        await stream.send_all(session.seal(reply))
                        body = await read_frame(stream, buffer, MAX_FRAME)
                        message = None if body is None else session.open(body)
                except RpcProtocolError as exc:
                    log.warning("control_rpc.connection_closed", error=str(exc), broker_id=broker_id)
                except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
                    pass
        except Exception:  # noqa: BLE001 - one connection's failure never ends the server
            log.error("control_rpc.connection_failed", broker_id=broker_id, exc_info=True)
        finally:
            # Any end counts (even our own cancellation): the hint only triggers a probe.
            if broker_id is not None:
                self.controller.connection_lost(broker_id)

    async def _handshake(self, stream: trio.SocketStream) -> tuple[ControlSession, bytearray, dict] | None:
        """The hellos and the first authenticated request, within HANDSHAKE_TIMEOUT_S.

        Returns the session, the input buffer and the first request; None if the peer
        closed first."""
        assert self._key is not None
        number = next(self._numbers)
        scope = trio.CancelScope(deadline=trio.current_time() + HANDSHAKE_TIMEOUT_S)
        self._handshaking[number] = scope
        while len(self._handshaking) > MAX_HANDSHAKES:
            self._handshaking.pop(next(iter(self._handshaking))).cancel()  # the oldest
        buffer = bytearray()
        try:
            with scope:
                hello = await read_frame(stream, buffer, HELLO_SIZE)
                if hello is None:
                    return None
                client_nonce = parse_hello(hello)
                server_nonce = os.urandom(NONCE_SIZE)
                await stream.send_all(encode_hello(server_nonce))
                session = ControlSession(self._key, client_nonce, server_nonce, is_client=False)
                body = await read_frame(stream, buffer, PRE_AUTH_MAX_FRAME)
                if body is None:
                    return None
                return session, buffer, session.open(body)
        finally:
            self._handshaking.pop(number, None)
        raise RpcProtocolError(f"no authenticated control frame within {HANDSHAKE_TIMEOUT_S} s of connecting "
                               f"(or dropped as the oldest of more than {MAX_HANDSHAKES} handshakes)")

    async def _answer(self, message: dict) -> dict:
        call_id = message.get("id")
        method = message.get("method")
        args = message.get("args")
        args = {} if args is None else args
        if not isinstance(method, str) or method not in METHODS:
            return {"id": call_id, "error": ["INVALID_REQUEST", f"unknown control method {method!r}"]}
        if not isinstance(args, dict):
            return {"id": call_id, "error": ["INVALID_REQUEST", f"arguments of {method} are a "
                                             f"{type(args).__name__}; expected a map"]}
        problem = check_arguments(method, args)
        if problem is not None:
            return {"id": call_id, "error": ["INVALID_REQUEST", problem]}
        if self.loader.active_controller_epoch() is None:
            return {"id": call_id, "error": ["NOT_CONTROLLER",
                                             f"not the active controller; try node {self.loader.image.controller.node_id}"]}
        try:
            args = _wire_args(method, args)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            return {"id": call_id, "error": ["INVALID_REQUEST", f"malformed arguments for {method}: {exc!r}"]}
        try:
            result = await getattr(self.controller, method)(**args)
            return {"id": call_id, "ok": METHODS[method](result)}
        except ControllerError as exc:
            return {"id": call_id, "error": [exc.name, exc.message]}
        except Exception as exc:  # noqa: BLE001 - a handler's bug is this call's error, not the process's end
            log.error("control_rpc.handler_failed", method=method, exc_info=True)
            return {"id": call_id, "error": ["UNKNOWN_SERVER_ERROR", f"{method} failed: {type(exc).__name__}: {exc}"]}


def _session_broker(message: dict, current: int | None) -> int | None:
    """The broker id a register/heartbeat call names, else `current`."""
    args = message.get("args")
    if message.get("method") in SESSION_METHODS and isinstance(args, dict):
        broker_id = args.get("broker_id")
        if _is_int(broker_id):
            return broker_id
    return current


class ControlRpcClient:
    """Calls one remote node's control RPC; one call at a time, reconnecting as needed."""

    def __init__(self, address: tuple[str, int], secret: str, cluster_id: str) -> None:
        self.address = address
        self._secret = secret
        self._cluster_id = cluster_id
        self._stream: trio.SocketStream | None = None
        self._session: ControlSession | None = None
        self._buffer = bytearray()
        self._lock = trio.Lock()
        self._ids = itertools.count(1)

    async def _connect(self) -> None:
        key = await cluster_key(self._secret, self._cluster_id)
        self._stream = await trio.open_tcp_stream(*self.address)
        self._buffer = bytearray()
        client_nonce = os.urandom(NONCE_SIZE)
        await self._stream.send_all(encode_hello(client_nonce))
        hello = await read_frame(self._stream, self._buffer, HELLO_SIZE)
        if hello is None:
            raise RpcProtocolError("connection closed during the control hello")
        self._session = ControlSession(key, client_nonce, parse_hello(hello), is_client=True)

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
                        await self._connect()
                    assert self._stream is not None and self._session is not None
                    call_id = next(self._ids)
                    await self._stream.send_all(self._session.seal({"id": call_id, "method": method, "args": args}))
                    body = await read_frame(self._stream, self._buffer, MAX_FRAME)
                    reply = None if body is None else self._session.open(body)
            except trio.Cancelled:
                await self.aclose()  # a reply may be half read: never reuse this stream
                raise
            except trio.TooSlowError:
                await self.aclose()
                raise ControllerError(ErrorCode.REQUEST_TIMED_OUT,
                                              f"control call {method} to {self.address[0]}:{self.address[1]}: no answer "
                                              f"within {wait_s:g} s; its outcome is unknown") from None
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, RpcProtocolError) as exc:
                await self.aclose()
                raise ControllerError(ErrorCode.NOT_CONTROLLER,
                                              f"control call {method} to {self.address[0]}:{self.address[1]} failed: "
                                              f"{exc!r}") from None
            if reply is None or reply.get("id") != call_id:
                await self.aclose()
                raise ControllerError(ErrorCode.NOT_CONTROLLER, f"control call {method}: connection lost")
        if "error" in reply:
            name, message = reply["error"]
            raise ControllerError.named(name, str(message))
        return reply.get("ok")

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        self._session = None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


def heartbeat_reply(data: dict) -> HeartbeatReply:
    return HeartbeatReply(fenced=bool(data["fenced"]), shutdown_ready=bool(data["shutdown_ready"]))
