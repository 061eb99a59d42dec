"""N raftka nodes on this machine, one process each, started through the public CLI.

The one way everything starts local nodes: `raftka cluster up`, the pytest
plugin (`raftka_cluster`), the chaos runner and the project's own tests. It
drives nodes only as a user would (`python -m raftka server start` and the
wire), so it imports nothing of the broker or the quorum.

Ports. Node i (1-based) gets, from a port base P: client port P + 100*(i-1),
quorum (CONTROLLER) port that + 1, and the controller RPC port (quorum port +
`controller.rpc.port.offset`, 1) that + 2. `cluster up` uses P = 9092, so the
default cluster is 9092/9093/9094, 9192/9193/9194, ... With `port_base=None`
a free base below the ephemeral range is chosen (see `free_port_base`), and
`start` picks another one if a node loses a race for its ports.

The data directory holds `cluster.properties` (cluster id and quorum secret,
made once, so a second start reuses the data) and `node-<i>/` with that
node's `server.properties`, `data/` (log.dirs) and `server.log`. The metadata
log lives where Kafka keeps it by default, in the first log dir
(`data/__cluster_metadata-0`, no `metadata.log.dir`): the layout docs/operations.md
documents for several machines. `separate_metadata_log_dir=True` sets
`metadata.log.dir` to `node-<i>/meta/` instead, and a node whose `meta/` was
formatted by an earlier raftka (which always laid it out so) keeps it there.

Every node is told its launcher's pid (`RAFTKA_EXIT_WITH_PARENT`) and shuts
itself down when the launcher dies, however it dies (kill -9 included), so
a crashed test run or `cluster up` leaves no process behind.
"""

from __future__ import annotations

import base64
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raftka.client.security import ClientSecurity
from raftka.log.dir_lock import DirLock, DirLocked

# Printed by `raftka server start` once the node serves clients; launchers wait for it.
READY_MARKER = "raftka node ready"
# The launcher's pid; a node whose parent is no longer that pid shuts down (raftka/cli/server.py).
EXIT_WITH_PARENT_ENV = "RAFTKA_EXIT_WITH_PARENT"
# How long stop/kill waits, once a node's process has exited, for its last lines to reach its
# log file (a reader thread copies them from the pipe); bounded should a child hold the pipe.
PUMP_DRAIN_S = 10.0
PORT_STRIDE = 100
# Node-relative ports: client, quorum, controller RPC (quorum + the default offset 1), and the
# Prometheus metrics endpoint when the cluster has one (`metrics=True`: 9095, 9195, ...).
PORT_OFFSETS = (0, 1, 2)
METRICS_PORT_OFFSET = 3
# Ports are chosen below Linux's ephemeral range (ip_local_port_range 32768-60999): a
# port in that range can be taken by some connection's source port while its node is
# down, and the restarted node then cannot bind it.
LOW_PORTS = (10000, 32000)

# Failure detection in seconds rather than Kafka's defaults (9 s sessions, 30 s lag), for
# tests and fault-injection runs that must see faults handled quickly.
FAST_FAILURE_DETECTION = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "leader.imbalance.check.interval.seconds": "3600",
}

CONTROLLER_LISTENER = "CONTROLLER"

_BIND_FAILURES = ("could not bind", "Address already in use")


def random_cluster_id() -> str:
    """A cluster id as Kafka makes them: a random UUID, base64url without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def port_listenable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` now, as the nodes do (SO_REUSEADDR: a closed
    connection's TIME-WAIT does not count, a listener or a bound socket does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_low_port(used: set[int], host: str = "127.0.0.1") -> int:
    """A free port below the ephemeral range, not in `used` (which it is added to)."""
    for _ in range(200):
        port = random.randint(20000, LOW_PORTS[1])
        if port not in used and port_free(port, host):
            used.add(port)
            return port
    raise RuntimeError(f"no free port in 20000-{LOW_PORTS[1]} after 200 tries")


def free_port_base(nodes: int, ports_of: Callable[[int], list[tuple[str, int]]] | None = None,
                   offsets: tuple[int, ...] = PORT_OFFSETS) -> int:
    """A port base (a multiple of 10) whose nodes' ports are all free.

    `ports_of(base)` lists the (host, port) pairs a layout needs; the default is
    LocalCluster's loopback ports per node (`offsets`)."""
    def default_ports(base: int) -> list[tuple[str, int]]:
        return [("127.0.0.1", base + PORT_STRIDE * i + o) for i in range(nodes) for o in offsets]

    ports_of = ports_of or default_ports
    for _ in range(200):
        base = random.randrange(LOW_PORTS[0], LOW_PORTS[1] - PORT_STRIDE * nodes, 10)
        if all(port_free(port, host) for host, port in ports_of(base)):
            return base
    raise RuntimeError(f"no free port range for {nodes} node(s) between {LOW_PORTS[0]} and {LOW_PORTS[1]}")


def _child_env(log_level: str) -> dict[str, str]:
    """The nodes run the raftka this process imported, whatever the current directory holds."""
    env = dict(os.environ)
    root = _package_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["RAFTKA_LOG_LEVEL"] = log_level
    env[EXIT_WITH_PARENT_ENV] = str(os.getpid())
    return env


def _package_root() -> str:
    """The folder holding the `raftka` package this process imported (site-packages, or a
    source checkout): `python -m raftka` in a node must not find another one in its cwd."""
    top = sys.modules[__name__.split(".")[0]]  # the `raftka` package, imported as our parent
    return str(Path(top.__file__).resolve().parents[1])


class ClusterRunning(RuntimeError):
    """Another launcher holds this data dir."""


class NodeExited(RuntimeError):
    """A node process ended before it was ready."""

    def __init__(self, message: str, bind_failure: bool) -> None:
        super().__init__(message)
        self.bind_failure = bind_failure


@dataclass
class Node:
    node_id: int
    directory: Path
    client_port: int
    quorum_port: int
    host: str = "127.0.0.1"
    process: subprocess.Popen | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    stopped_by_us: bool = False
    # process.roles=broker (added by `add_node`): no CONTROLLER listener, not a voter.
    broker_only: bool = False
    # metadata.log.dir=<directory>/meta rather than the first log dir (Kafka's default).
    separate_metadata_log_dir: bool = False
    # The threads that copy the process's stdout and stderr (into log_path): they end at the
    # pipes' end, after the process's last line.
    pumps: list[threading.Thread] = field(default_factory=list)

    @property
    def roles(self) -> str:
        return "broker" if self.broker_only else "broker,controller"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def data_dir(self) -> Path:
        """The node's log dir (log.dirs)."""
        return self.directory / "data"

    @property
    def metadata_log_dir(self) -> Path:
        """Where the node's metadata log lives: its log dir (the journal in
        `__cluster_metadata-0` under it), or `meta/` with a separate metadata.log.dir.
        A `meta/` an earlier raftka formatted stays in use: its journal is the node's."""
        separate = self.directory / "meta"
        if self.separate_metadata_log_dir or (separate / "meta.properties").exists():
            return separate
        return self.data_dir

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def metrics_port(self) -> int:
        return self.client_port + METRICS_PORT_OFFSET

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    """N nodes on loopback (or `host`); `start()` + `wait_ready()`, then `stop()`.

    `port_base=None` picks free ports (tests, the pytest plugin); `cluster up`
    passes 9092. `extra_config` is added to (and overrides) every node's
    server.properties. `on_line(node_id, line)` sees each node's log lines.

    The metadata log goes in each node's log dir (Kafka's default layout) unless
    `separate_metadata_log_dir` puts it in `node-<i>/meta` (metadata.log.dir).

    Secured clusters (raftka/testing/secure_cluster.py builds them): `listener_protocol` names the
    client listener and its security protocol (SSL, SASL_SSL, ...), `node_config(node)` adds
    per-node properties (key store paths), and `client_security` is what `admin()` uses."""

    def __init__(self, data_dir: str | Path, nodes: int = 3, *, port_base: int | None = None,
                 host: str = "127.0.0.1", extra_config: Mapping[str, str] | None = None,
                 log_level: str = "INFO", on_line: Callable[[int, str], None] | None = None,
                 metrics: bool = False,
                 listener_protocol: str = "PLAINTEXT",
                 node_config: Callable[[Node], Mapping[str, str]] | None = None,
                 client_security: ClientSecurity | None = None,
                 separate_metadata_log_dir: bool = False) -> None:
        if nodes < 1:
            raise ValueError(f"nodes={nodes}; expected at least 1")
        if port_base is not None and port_base + PORT_STRIDE * (nodes - 1) + 2 >= 32768:
            raise ValueError(f"port base {port_base} with {nodes} nodes reaches the ephemeral range "
                             "(>= 32768); expected a lower --port-base")
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.extra_config = {str(k): str(v) for k, v in (extra_config or {}).items()}
        self.log_level = log_level
        self.on_line = on_line
        self.listener_protocol = listener_protocol
        self.node_config = node_config
        self.client_security = client_security
        self.choose_ports = port_base is None
        self.node_count = nodes
        self.metrics = metrics  # each node serves Prometheus metrics on its client port + 3
        self.separate_metadata_log_dir = separate_metadata_log_dir
        self._lock = DirLock(self.data_dir)
        self._place(self.pick_port_base() if port_base is None else port_base)

    def _place(self, port_base: int) -> None:
        self.port_base = port_base
        self.nodes = {i: self._new_node(i) for i in range(1, self.node_count + 1)}

    def _new_node(self, node_id: int, broker_only: bool = False) -> Node:
        """Node `node_id` at its place in the port layout (client port base + 100*(id-1))."""
        client_port = self.port_base + PORT_STRIDE * (node_id - 1)
        return Node(node_id, self.data_dir / f"node-{node_id}", client_port, client_port + 1, self.host,
                    broker_only=broker_only, separate_metadata_log_dir=self.separate_metadata_log_dir)

    def pick_port_base(self) -> int:
        """A free port base for this layout (subclasses with other ports override it)."""
        offsets = PORT_OFFSETS + ((METRICS_PORT_OFFSET,) if self.metrics else ())
        return free_port_base(self.node_count, offsets=offsets)

    # -- configuration ----------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    @property
    def bootstrap(self) -> str:
        """The running nodes' client addresses (all nodes when none runs)."""
        running = [n.bootstrap for n in self.nodes.values() if n.running]
        return ",".join(running) or self.bootstrap_servers

    def lock(self) -> None:
        """Take the data dir's lock (held until `stop`): a second launcher on the same data dir
        would rewrite the running nodes' server.properties and start nodes on their logs."""
        try:
            self._lock.acquire()
        except DirLocked as exc:
            raise ClusterRunning(f"already running in {self.data_dir} ({exc.holder}); "
                                 "expected another --data-dir, or stop that cluster first") from None

    def _identity(self) -> tuple[str, str]:
        """(cluster id, secret), created once per data dir, in a 0600 file from the start."""
        path = self.data_dir / "cluster.properties"
        if path.exists():
            values = dict(line.split("=", 1) for line in path.read_text().split() if "=" in line)
            return values["cluster.id"], values["controller.quorum.secret"]
        cluster_id, secret = random_cluster_id(), secrets.token_urlsafe(24)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _write_private(path, f"cluster.id={cluster_id}\ncontroller.quorum.secret={secret}\n")
        return cluster_id, secret

    def prepare(self) -> str:
        """Write every node's server.properties; the cluster id (storage is formatted at start).
        Raises ClusterRunning, writing nothing, if another launcher holds the data dir."""
        self.lock()
        cluster_id, _ = self._identity()
        self._adopt_added_nodes()
        for node in self.nodes.values():
            self._write_properties(node)
        self.cluster_id = cluster_id
        return cluster_id

    def _write_properties(self, node: Node) -> None:
        _, secret = self._identity()
        voters = ",".join(f"{n.node_id}@{self.host}:{n.quorum_port}" for n in self.nodes.values() if not n.broker_only)
        node.directory.mkdir(parents=True, exist_ok=True)
        lines = self.node_properties(node, voters, secret)
        if node.broker_only:
            lines["process.roles"] = "broker"
            lines["listeners"] = ",".join(
                e for e in lines["listeners"].split(",") if not e.startswith(f"{CONTROLLER_LISTENER}://"))
        if self.node_config is not None:
            lines.update(self.node_config(node))
        lines.update(self.extra_config)
        _write_private(node.config_path, "".join(f"{k}={v}\n" for k, v in lines.items()))

    def _adopt_added_nodes(self) -> None:
        """Broker-only nodes that `add_node` made in this data dir before (node-<id>/ after the
        voters, their server.properties saying process.roles=broker) start with the others: the
        partitions moved onto them would be offline otherwise."""
        node_id = max(self.nodes) + 1
        while True:
            path = self.data_dir / f"node-{node_id}" / "server.properties"
            try:
                broker_only = "process.roles=broker\n" in path.read_text()
            except OSError:
                return
            if not broker_only:
                return
            self.nodes[node_id] = self._new_node(node_id, broker_only=True)
            node_id += 1

    def busy_ports(self) -> list[tuple[int, str, int]]:
        """(node id, role, port) for each port this cluster's nodes need that something holds now:
        checked before a start, so that a taken port is one clear line, not a node's crash."""
        busy = []
        for node in self.nodes.values():
            ports = [("client", node.client_port)]
            if not node.broker_only:
                ports += [("quorum", node.quorum_port), ("controller RPC", node.quorum_port + 1)]
            if self.metrics:
                ports.append(("metrics", node.metrics_port))
            busy += [(node.node_id, role, port) for role, port in ports if not port_listenable(port, node.host)]
        return busy

    def add_node(self) -> Node:
        """Add a broker-only node (process.roles=broker) with the next id to a prepared cluster,
        its ports laid out like the others' (client port base + 100*(id-1)): writes its
        server.properties; `start_node(id)` formats its storage and starts it. It follows the
        metadata quorum as an observer; move partitions onto it with a reassignment.

        Raises ValueError if its ports are taken or reach the ephemeral range."""
        node = self._new_node(max(self.nodes) + 1, broker_only=True)
        node_id = node.node_id
        ports = [node.client_port] + ([node.metrics_port] if self.metrics else [])
        if max(ports) >= LOW_PORTS[1]:
            raise ValueError(f"node {node_id}'s port {max(ports)} reaches the ephemeral range; "
                             "expected a cluster started with a lower --port-base")
        taken = [port for port in ports if not port_free(port, self.host)]
        if taken:
            raise ValueError(f"node {node_id}'s port(s) {taken} on {self.host} are in use; expected them free")
        self.nodes[node_id] = node
        self._write_properties(node)
        return node

    def node_properties(self, node: Node, voters: str, secret: str) -> dict[str, str]:
        """One node's server.properties (before `extra_config`); subclasses move its listeners."""
        rf = min(3, sum(not n.broker_only for n in self.nodes.values()))
        return {
            "node.id": str(node.node_id),
            "process.roles": "broker,controller",
            "listeners": f"{self.listener_protocol}://{self.host}:{node.client_port},"
                         f"{CONTROLLER_LISTENER}://{self.host}:{node.quorum_port}",
            "advertised.listeners": f"{self.listener_protocol}://{self.host}:{node.client_port}",
            "controller.listener.names": CONTROLLER_LISTENER,
            "controller.quorum.voters": voters,
            "controller.quorum.secret": secret,
            "log.dirs": str(node.data_dir),
            **({"metadata.log.dir": str(node.metadata_log_dir)} if node.metadata_log_dir != node.data_dir else {}),
            "default.replication.factor": str(rf),
            "offsets.topic.replication.factor": str(rf),
            "min.insync.replicas": str(min(2, rf)),
            **({"metrics.port": str(node.metrics_port)} if self.metrics else {}),
        }

    def metrics_urls(self) -> dict[int, str]:
        """Each node's Prometheus endpoint (empty without `metrics=True`)."""
        if not self.metrics:
            return {}
        return {i: f"http://{n.host}:{n.metrics_port}/metrics" for i, n in self.nodes.items()}

    # -- processes ------------------------------------------------------------------

    def start_node(self, node_id: int, *, wait: bool = False, timeout: float = 60.0) -> None:
        """Start node `node_id` (formatting its storage on first start); with `wait`, return once
        it serves clients and is a live broker."""
        node = self.nodes[node_id]
        if not node.running:
            self.lock()
            node.ready.clear()
            node.stopped_by_us = False
            log_file = open(node.log_path, "a")  # noqa: SIM115 - owned by the reader thread
            node.process = subprocess.Popen(
                [sys.executable, "-m", "raftka", *self.server_args(node)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(self.log_level),
                start_new_session=True,  # Ctrl-C at the terminal goes to the launcher, which stops nodes in order
            )
            node.pumps = [threading.Thread(target=self._pump, args=(node, node.process.stdout, None), daemon=True),
                          threading.Thread(target=self._pump, args=(node, node.process.stderr, log_file), daemon=True)]
            for pump in node.pumps:
                pump.start()
        if wait:
            self.wait_ready(timeout, nodes=[node_id])

    def server_args(self, node: Node) -> list[str]:
        """The `raftka` command line that runs a node (subclasses run another documented one)."""
        return ["server", "start", "--config", str(node.config_path), "--format", "--cluster-id", self.cluster_id]

    @staticmethod
    def _drained(node: Node, timeout: float = PUMP_DRAIN_S) -> None:
        """Once `node`'s process has exited: wait (a bounded time) for its reader threads to copy
        its last lines, so that its log file is complete when stop/kill returns."""
        deadline = time.monotonic() + timeout
        for pump in node.pumps:
            pump.join(max(0.0, deadline - time.monotonic()))

    def _pump(self, node: Node, stream, log_file) -> None:
        try:
            for line in stream:
                if READY_MARKER in line:
                    node.ready.set()
                if log_file is not None:
                    log_file.write(line)
                    log_file.flush()
                if self.on_line is not None:
                    self.on_line(node.node_id, line.rstrip("\n"))
        finally:
            if log_file is not None:
                log_file.close()

    def start(self) -> None:
        self.prepare()
        for node_id in self.nodes:
            self.start_node(node_id)

    def start_and_wait(self, timeout: float = 60.0, attempts: int = 3) -> None:
        """`start` + `wait_ready`. With chosen ports, a node that lost its ports to another
        process between the choice and its bind is retried on a new port base."""
        for attempt in range(1, attempts + 1):
            try:
                self.start()
                self.wait_ready(timeout)
                return
            except NodeExited as exc:
                self.stop()
                if not (exc.bind_failure and self.choose_ports and attempt < attempts):
                    raise
                self._place(self.pick_port_base())

    def wait_ready(self, timeout: float = 60.0, nodes: list[int] | None = None) -> None:
        """Every (given) node serves clients and the cluster lists them all as live brokers."""
        deadline = time.monotonic() + timeout
        wanted = [self.nodes[i] for i in (nodes or self.nodes)]
        for node in wanted:
            while not node.ready.wait(0.05):
                if not node.running:
                    status = node.process.poll() if node.process is not None else None
                    tail = _tail(node.log_path)
                    raise NodeExited(f"node {node.node_id} exited with status {status}; "
                                     f"see {node.log_path}:\n{tail}",
                                     bind_failure=any(s in tail for s in _BIND_FAILURES))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"node {node.node_id} not ready within {timeout}s; see {node.log_path}")
        if len(self.nodes) > 1:  # a single node's ready line already means registered and unfenced
            self.wait_live_brokers({n.node_id for n in wanted}, max(1.0, deadline - time.monotonic()))

    def admin(self):
        """A blocking Admin client on the running nodes (close it, or use it in a `with`)."""
        from raftka.client.blocking import Admin

        return Admin(self.bootstrap, security=self.client_security)

    def live_brokers(self) -> set[int]:
        with self.admin() as admin:
            return {b.node_id for b in admin.describe_cluster().brokers}

    def wait_live_brokers(self, wanted: set[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: set[int] | BaseException = set()
        while time.monotonic() < deadline:
            try:
                last = self.live_brokers()
                if wanted <= last:
                    return
            except Exception as exc:  # the cluster may still be electing
                last = exc
            time.sleep(0.2)
        raise TimeoutError(f"brokers {sorted(wanted)} not all live within {timeout}s (last seen: {last!r})")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None, timeout: float = 30.0) -> str:
        """Create a topic and return once every partition has a leader and a full ISR.
        `replication_factor` defaults to min(3, nodes)."""
        from raftka.client.admin import NewTopic

        rf = replication_factor or min(3, len(self.nodes))
        with self.admin() as admin:
            admin.create_topics([NewTopic(name, partitions, rf, dict(config or {}))])
        self.wait_full_isr({name: partitions}, timeout)
        return name

    def wait_full_isr(self, topics: Mapping[str, int], timeout: float = 30.0) -> None:
        """Return once each topic has its number of partitions, each with a leader and every
        replica in the ISR; TimeoutError naming the first that has not after `timeout`."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                with self.admin() as admin:
                    descs = admin.describe_topics(list(topics))
                last = next((d for d in descs if len(d.partitions) != topics[d.name] or not all(
                    p.leader >= 0 and set(p.isr) == set(p.replicas) for p in d.partitions)), None)
                if last is None:
                    return
            except Exception as exc:  # metadata not propagated yet, or a node just restarted
                last = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {sorted(topics)}: partitions without a leader or a full ISR "
                                   f"after {timeout}s (last seen: {last!r})")
            time.sleep(0.05)

    def delete_topic(self, name: str) -> None:
        with self.admin() as admin:
            admin.delete_topics([name])

    def kill(self, node_id: int) -> None:
        """SIGKILL: a crash."""
        node = self.nodes[node_id]
        if node.running:
            node.stopped_by_us = True
            node.process.kill()
            node.process.wait()
            self._drained(node)

    kill_node = kill

    def pause(self, node_id: int) -> None:
        self.nodes[node_id].process.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].process.send_signal(signal.SIGCONT)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> int | None:
        """SIGTERM (controlled shutdown), then SIGKILL after `timeout`."""
        node = self.nodes[node_id]
        if not node.running:
            return None if node.process is None else node.process.returncode
        node.stopped_by_us = True
        node.process.send_signal(signal.SIGCONT)
        node.process.terminate()
        try:
            status = node.process.wait(timeout)
        except subprocess.TimeoutExpired:
            node.process.kill()
            status = node.process.wait()
        self._drained(node)
        return status

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node: all get SIGTERM together, stragglers SIGKILL."""
        nodes = list(self.nodes.values())
        for node in nodes:
            if node.running:
                node.stopped_by_us = True
                node.process.send_signal(signal.SIGCONT)
                node.process.terminate()
        deadline = time.monotonic() + timeout
        for node in nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        for node in nodes:
            self._drained(node)
        self._lock.release()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file readable by its owner only, from its creation on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its old mode through O_CREAT
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _tail(path: Path, size: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


__all__ = ["ClusterRunning", "FAST_FAILURE_DETECTION", "LocalCluster", "Node", "NodeExited", "PORT_STRIDE", "READY_MARKER",
           "free_low_port", "free_port_base", "random_cluster_id"]
