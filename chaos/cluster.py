"""A LocalCluster whose nodes are reached only through the harness's fault proxies.

Node i (1-based, port base P, stride 100) as the cluster sees it:
    client   127.0.0.1:C          C = P + 100*(i-1)   (advertised; a proxy)
    quorum   127.0.0.1:C+1        (controller.quorum.voters; a proxy)
    ctl RPC  127.0.0.1:C+2        (quorum port + 1; NOT proxied, see below)
and where the node really listens:
    client   127.0.0.1:C+50       (listeners PLAINTEXT)
    quorum   127.0.0.2:C+1        (listeners CONTROLLER: same port as the voter entry, as
                                   NodeConfig requires, on another loopback address)

pysyncobj knows each peer by its voter address string, so every node must use
the same voter list; the proxies tell the nodes apart by asking the kernel who
dialled (chaos/socket_owner.py). The controller RPC binds the voter host itself
(NodeConfig.controller_rpc_address), so it cannot sit behind a proxy until
raftka can bind it on the CONTROLLER listener's host; partitions therefore cut
the data path and the quorum path, not broker->controller heartbeats.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path

from chaos.proxy import ProxyNet, Route
from raftka.local_cluster import PORT_STRIDE, LocalCluster

REAL_CLIENT_OFFSET = 50
QUORUM_BIND_HOST = "127.0.0.2"
HOST = "127.0.0.1"

# Fast failure detection so a short run sees faults handled; Kafka's defaults are minutes.
FAST_DETECTION = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "leader.imbalance.check.interval.seconds": "3600",
}


def _free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def ports_free(base: int, nodes: int) -> bool:
    for i in range(nodes):
        c = base + PORT_STRIDE * i
        wanted = [(HOST, c), (HOST, c + 1), (HOST, c + 2), (HOST, c + REAL_CLIENT_OFFSET), (QUORUM_BIND_HOST, c + 1)]
        if not all(_free(h, p) for h, p in wanted):
            return False
    return True


def find_port_base(nodes: int, rng) -> int:
    for _ in range(200):
        base = rng.randrange(10000, 32000 - PORT_STRIDE * nodes, 10)
        if ports_free(base, nodes):
            return base
    raise RuntimeError(f"no free port range for {nodes} proxied nodes between 10000 and 32000")


class ProxiedCluster(LocalCluster):
    """LocalCluster + one proxy per node for the client and the quorum port."""

    def __init__(self, data_dir: str | Path, nodes: int, *, port_base: int,
                 extra_config: Mapping[str, str] | None = None, log_level: str = "INFO") -> None:
        super().__init__(data_dir, nodes, port_base=port_base, host=HOST,
                         extra_config=extra_config, log_level=log_level)
        self.proxies = ProxyNet(self._pids)
        for node in self.nodes.values():
            self.proxies.add(Route(f"n{node.node_id}.client", node.node_id, "data", (HOST, node.client_port),
                                   (HOST, node.client_port + REAL_CLIENT_OFFSET)))
            self.proxies.add(Route(f"n{node.node_id}.raft", node.node_id, "raft", (HOST, node.quorum_port),
                                   (QUORUM_BIND_HOST, node.quorum_port)))

    def _pids(self) -> dict[int, int]:
        return {n.process.pid: i for i, n in self.nodes.items() if n.process is not None}

    def prepare(self) -> None:
        cluster_id, secret = self._identity()
        voters = ",".join(f"{n.node_id}@{HOST}:{n.quorum_port}" for n in self.nodes.values())
        rf = min(3, len(self.nodes))
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            lines = {
                "node.id": str(node.node_id),
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://{HOST}:{node.client_port + REAL_CLIENT_OFFSET},"
                             f"CONTROLLER://{QUORUM_BIND_HOST}:{node.quorum_port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{node.client_port}",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "controller.quorum.secret": secret,
                "log.dirs": str(node.directory / "data"),
                "metadata.log.dir": str(node.directory / "meta"),
                "default.replication.factor": str(rf),
                "offsets.topic.replication.factor": str(rf),
                "min.insync.replicas": str(min(2, rf)),
                **FAST_DETECTION,
            }
            lines.update(self.extra_config)
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
            node.config_path.chmod(0o600)
            if not (node.directory / "meta" / "meta.properties").exists():
                self._cli("storage", "format", "--config", str(node.config_path), "--cluster-id", cluster_id,
                          "--ignore-formatted")

    def start(self) -> None:
        self.proxies.start()
        super().start()

    def stop(self, timeout: float = 30.0) -> None:
        try:
            self.proxies.heal()
        except Exception:  # the proxies may never have started
            pass
        for node in self.nodes.values():
            if node.running:
                self.resume(node.node_id)
        try:
            super().stop(timeout)
        finally:
            self.proxies.stop()
