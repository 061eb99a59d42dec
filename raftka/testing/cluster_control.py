"""`raftka cluster kill|stop|start|restart|status --node N`: act on the nodes of a running `cluster up`.

The `cluster up` process owns its nodes (they are its children and exit with it), so the
other commands ask it: it serves a Unix socket, `cluster.sock` in the data dir (mode 0600,
like the dir's other private files), and acts on its `LocalCluster`. One request per
connection, a JSON line each way:

    {"op": "kill", "node": 2}            ->  {"ok": true, "message": "node 2 killed (SIGKILL)"}

Ops: `status` (every node's state), `kill` (SIGKILL: a crash), `stop` (SIGTERM: controlled
shutdown), `start` (answers once the node serves again), `restart` (stop, then start),
`add-node` (a broker-only node with the next id, formatted and started; answers once it serves). A
request is at most MAX_REQUEST_BYTES read within REQUEST_TIMEOUT_S; the socket is reachable
only by this user (file mode), and a bad request gets an error answer, never a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import tempfile
import threading
from pathlib import Path

OPS = ("status", "kill", "stop", "start", "restart", "add-node")
MAX_REQUEST_BYTES = 4096
REQUEST_TIMEOUT_S = 5.0
START_TIMEOUT_S = 90.0
SOCKET_NAME = "cluster.sock"
# Linux's sun_path holds 108 bytes; a longer data-dir path uses a socket under the temp dir,
# whose path is written to DATA_DIR/cluster.sock.path.
MAX_SOCKET_PATH = 100


class ControlError(RuntimeError):
    """A request that could not be made or was refused (the message says why)."""


def socket_path(data_dir: str | Path) -> Path:
    """Where the control socket of the cluster in `data_dir` lives."""
    data_dir = Path(data_dir).resolve()
    direct = data_dir / SOCKET_NAME
    if len(str(direct)) <= MAX_SOCKET_PATH:
        return direct
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"raftka-{os.getuid()}-{digest}.sock"


def describe_exit(returncode: int | None) -> str:
    """`exit code 1` / `signal SIGKILL` for a Popen return code."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class ControlServer:
    """Serves the control socket for a running `cluster up` (a thread; `close` removes the socket)."""

    def __init__(self, cluster, data_dir: str | Path) -> None:
        self.cluster = cluster
        self.path = socket_path(data_dir)
        self._lock = threading.Lock()  # one node action at a time
        self._sock: socket.socket | None = None
        self._closed = threading.Event()

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket of a killed `cluster up` (the data-dir lock is ours)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(8)
        sock.settimeout(0.5)
        self._sock = sock
        threading.Thread(target=self._serve, name="cluster-control", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        if self._sock is not None:
            self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(REQUEST_TIMEOUT_S)
                request = _read_line(conn)
                reply = self.handle(request)
            except (OSError, ValueError) as exc:
                reply = {"ok": False, "message": f"bad request: {exc}"}
            except Exception as exc:  # one bad request never takes `cluster up` down
                reply = {"ok": False, "message": f"failed: {exc!r}"}
            with contextlib.suppress(OSError):
                conn.settimeout(START_TIMEOUT_S)
                conn.sendall(json.dumps(reply).encode() + b"\n")

    def handle(self, request: dict) -> dict:
        """The answer to one decoded request (also what the tests drive)."""
        op = request.get("op")
        if op not in OPS:
            return {"ok": False, "message": f"unknown op {op!r}; expected one of {', '.join(OPS)}"}
        if op == "status":
            return {"ok": True, "message": self.status_text(), "nodes": self.status()}
        if op == "add-node":
            with self._lock:
                return self._add_node()
        node_id = request.get("node")
        if not isinstance(node_id, int) or node_id not in self.cluster.nodes:
            return {"ok": False, "message": f"no node {node_id!r}; this cluster has nodes "
                                            f"{', '.join(str(n) for n in self.cluster.nodes)}"}
        with self._lock:
            return getattr(self, f"_{op}")(node_id)

    def status(self) -> list[dict]:
        out = []
        for node_id, node in list(self.cluster.nodes.items()):
            process = node.process
            out.append({"node": node_id, "running": node.running, "roles": node.roles,
                        "pid": process.pid if process is not None and node.running else None,
                        "state": "running" if node.running else (
                            "never started" if process is None else describe_exit(process.returncode)),
                        "bootstrap": node.bootstrap})
        return out

    def status_text(self) -> str:
        return "\n".join(f"node {s['node']}: {'running, pid ' + str(s['pid']) if s['running'] else 'down (' + s['state'] + ')'}"
                         f", {s['bootstrap']}" + ("" if s["roles"] != "broker" else ", broker only")
                         for s in self.status())

    def _kill(self, node_id: int) -> dict:
        if not self.cluster.nodes[node_id].running:
            return {"ok": False, "message": f"node {node_id} is not running"}
        self.cluster.kill(node_id)
        return {"ok": True, "message": f"node {node_id} killed (SIGKILL)"}

    def _stop(self, node_id: int) -> dict:
        if not self.cluster.nodes[node_id].running:
            return {"ok": False, "message": f"node {node_id} is not running"}
        code = self.cluster.stop_node(node_id)
        return {"ok": True, "message": f"node {node_id} stopped ({describe_exit(code)})"}

    def _start(self, node_id: int) -> dict:
        if self.cluster.nodes[node_id].running:
            return {"ok": False, "message": f"node {node_id} is already running"}
        try:
            self.cluster.start_node(node_id, wait=True, timeout=START_TIMEOUT_S - 5)
        except (RuntimeError, TimeoutError) as exc:
            return {"ok": False, "message": f"node {node_id} did not come back: {exc}"}
        return {"ok": True, "message": f"node {node_id} is serving again at {self.cluster.nodes[node_id].bootstrap}"}

    def _add_node(self) -> dict:
        try:
            node = self.cluster.add_node()
        except ValueError as exc:
            return {"ok": False, "message": f"no node added: {exc}"}
        try:
            self.cluster.start_node(node.node_id, wait=True, timeout=START_TIMEOUT_S - 5)
        except (RuntimeError, TimeoutError) as exc:
            return {"ok": False, "node": node.node_id,
                    "message": f"node {node.node_id} added but did not start: {exc}; "
                               f"retry with `cluster start --node {node.node_id}`"}
        return {"ok": True, "node": node.node_id,
                "message": f"node {node.node_id} (broker only) is serving at {node.bootstrap}; it holds no "
                           f"partitions yet: move some onto it with `raftka reassign generate --broker-list "
                           f"...,{node.node_id}` then `reassign execute`"}

    def _restart(self, node_id: int) -> dict:
        if self.cluster.nodes[node_id].running:
            self.cluster.stop_node(node_id)
        return self._start(node_id)


def _read_line(conn: socket.socket) -> dict:
    buf = bytearray()
    while b"\n" not in buf:
        if len(buf) > MAX_REQUEST_BYTES:
            raise ValueError(f"longer than {MAX_REQUEST_BYTES} bytes")
        chunk = conn.recv(MAX_REQUEST_BYTES)
        if not chunk:
            break
        buf += chunk
    request = json.loads(bytes(buf).split(b"\n", 1)[0] or b"null")
    if not isinstance(request, dict):
        raise ValueError("expected a JSON object")
    return request


def send(data_dir: str | Path, op: str, node: int | None = None, timeout: float = START_TIMEOUT_S) -> dict:
    """Ask the `cluster up` of `data_dir` to do `op` (on `node`); its answer."""
    path = socket_path(data_dir)
    if not path.exists():
        raise ControlError(f"no running `raftka cluster up` in {Path(data_dir).resolve()} "
                           "(start one, or pass the --data-dir it uses)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            raise ControlError(f"the `raftka cluster up` of {Path(data_dir).resolve()} is not running "
                               "(a stale control socket)") from None
        sock.sendall(json.dumps({"op": op, "node": node}).encode() + b"\n")
        buf = bytearray()
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    if not buf:
        raise ControlError("`raftka cluster up` closed the connection without an answer")
    return json.loads(bytes(buf).split(b"\n", 1)[0])
