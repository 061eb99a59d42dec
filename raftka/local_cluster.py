"""N raftka nodes on this machine, one process each, through the public CLI.

Used by `raftka cluster up`, by the multi-broker tests and by anything else
that needs a real cluster on loopback. Node i (1-based) gets, from a port
base P (default 9092): client port P + 100*(i-1), quorum (CONTROLLER) port
that + 1, and the controller RPC port (quorum + 1, the documented default)
that + 2 — so the default cluster is 9092/9093/9094, 9192/9193/9194, ...

The data directory holds `cluster.properties` (cluster id and quorum secret,
made once, so a second start reuses the data) and `node-<i>/` with that
node's `server.properties`, `data/` (log.dirs), `meta/` (metadata.log.dir)
and `server.log`.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

READY_MARKER = "raftka node ready"
PORT_STRIDE = 100

# Failure detection in seconds rather than Kafka's defaults (9 s sessions, 30 s lag), for
# tests and fault-injection runs that must see faults handled quickly.
FAST_FAILURE_DETECTION = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "leader.imbalance.check.interval.seconds": "3600",
}


def _repo_env(log_level: str) -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["RAFTKA_LOG_LEVEL"] = log_level
    return env


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

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    def __init__(self, data_dir: str | Path, nodes: int = 3, *, port_base: int = 9092, host: str = "127.0.0.1",
                 extra_config: Mapping[str, str] | None = None, log_level: str = "INFO",
                 on_line: Callable[[int, str], None] | None = None) -> None:
        if nodes < 1:
            raise ValueError(f"nodes={nodes}; expected at least 1")
        if port_base + PORT_STRIDE * (nodes - 1) + 2 >= 32768:
            raise ValueError(f"port base {port_base} with {nodes} nodes reaches the ephemeral range "
                             "(>= 32768); expected a lower --port-base")
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.extra_config = dict(extra_config or {})
        self.log_level = log_level
        self.on_line = on_line
        self.nodes = {
            i: Node(i, self.data_dir / f"node-{i}", port_base + PORT_STRIDE * (i - 1),
                    port_base + PORT_STRIDE * (i - 1) + 1, host)
            for i in range(1, nodes + 1)
        }

    # -- configuration ----------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def _identity(self) -> tuple[str, str]:
        """(cluster id, secret), created once per data dir."""
        path = self.data_dir / "cluster.properties"
        if path.exists():
            values = dict(line.split("=", 1) for line in path.read_text().split() if "=" in line)
            return values["cluster.id"], values["controller.quorum.secret"]
        from raft_meta.storage_format import random_cluster_id

        cluster_id, secret = random_cluster_id(), secrets.token_urlsafe(24)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(f"cluster.id={cluster_id}\ncontroller.quorum.secret={secret}\n")
        path.chmod(0o600)
        return cluster_id, secret

    def prepare(self) -> None:
        """Write every node's server.properties and format its storage if needed."""
        cluster_id, secret = self._identity()
        voters = ",".join(f"{n.node_id}@{self.host}:{n.quorum_port}" for n in self.nodes.values())
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            lines = self.node_properties(node, voters, secret)
            lines.update(self.extra_config)
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
            node.config_path.chmod(0o600)
            if not (node.directory / "meta" / "meta.properties").exists():
                self._cli("storage", "format", "--config", str(node.config_path), "--cluster-id", cluster_id,
                          "--ignore-formatted")

    def node_properties(self, node: Node, voters: str, secret: str) -> dict[str, str]:
        """One node's server.properties (before `extra_config`); subclasses move its listeners."""
        rf = min(3, len(self.nodes))
        return {
            "node.id": str(node.node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{self.host}:{node.client_port},CONTROLLER://{self.host}:{node.quorum_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{node.client_port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "controller.quorum.secret": secret,
            "log.dirs": str(node.directory / "data"),
            "metadata.log.dir": str(node.directory / "meta"),
            "default.replication.factor": str(rf),
            "offsets.topic.replication.factor": str(rf),
            "min.insync.replicas": str(min(2, rf)),
        }

    def _cli(self, *args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "raftka", *args], env=_repo_env("WARNING"),
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"raftka {' '.join(args[:2])} failed: {result.stderr.strip()}")

    # -- processes ------------------------------------------------------------------

    def start_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            return
        node.ready.clear()
        node.stopped_by_us = False
        log_file = open(node.directory / "server.log", "a")  # noqa: SIM115 - owned by the reader thread
        node.process = subprocess.Popen(
            [sys.executable, "-m", "raftka", "server", "start", "--config", str(node.config_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_repo_env(self.log_level),
            start_new_session=True,  # Ctrl-C at the terminal goes to `cluster up`, which stops nodes in order
        )
        threading.Thread(target=self._pump, args=(node, node.process.stdout, None), daemon=True).start()
        threading.Thread(target=self._pump, args=(node, node.process.stderr, log_file), daemon=True).start()

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

    def wait_ready(self, timeout: float = 60.0, nodes: list[int] | None = None) -> None:
        """Every (given) node serves clients and the cluster lists them all as live brokers."""
        deadline = time.monotonic() + timeout
        wanted = [self.nodes[i] for i in (nodes or self.nodes)]
        for node in wanted:
            while not node.ready.wait(0.1):
                if not node.running:
                    raise RuntimeError(f"node {node.node_id} exited with status {node.process.poll()}; "
                                       f"see {node.directory / 'server.log'}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"node {node.node_id} not ready within {timeout}s; "
                                       f"see {node.directory / 'server.log'}")
        self.wait_live_brokers({n.node_id for n in wanted}, max(1.0, deadline - time.monotonic()))

    def live_brokers(self) -> set[int]:
        from client.blocking import Admin

        with Admin(",".join(n.bootstrap for n in self.nodes.values() if n.running)) as admin:
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

    def kill(self, node_id: int) -> None:
        """SIGKILL: a crash."""
        node = self.nodes[node_id]
        if node.running:
            node.stopped_by_us = True
            node.process.kill()
            node.process.wait()

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
            return node.process.wait(timeout)
        except subprocess.TimeoutExpired:
            node.process.kill()
            return node.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node: all get SIGTERM together, stragglers SIGKILL."""
        for node in self.nodes.values():
            if node.running:
                node.stopped_by_us = True
                node.process.send_signal(signal.SIGCONT)
                node.process.terminate()
        deadline = time.monotonic() + timeout
        for node in self.nodes.values():
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["LocalCluster", "Node", "READY_MARKER"]
