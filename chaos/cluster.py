"""A LocalCluster whose nodes are reached only through the harness's fault proxies.

Node i (1-based, port base P, stride 100) as the cluster sees it:
    client   127.0.0.1:C          C = P + 100*(i-1)   (advertised; a proxy)
    quorum   127.0.0.1:C+1        (controller.quorum.voters; a proxy)
    ctl RPC  127.0.0.1:C+2        (quorum port + 1, where peers dial it; a proxy)
and where the node really listens:
    client   127.0.0.1:C+50       (listeners PLAINTEXT)
    quorum   127.0.0.2:C+1        (listeners CONTROLLER: same port as the voter entry, as
                                   NodeConfig requires, on another loopback address)
    ctl RPC  127.0.0.2:C+2        (NodeConfig.controller_rpc_bind_address: the CONTROLLER host)

pysyncobj knows each peer by its voter address string, so every node must use
the same voter list; the proxies tell the nodes apart by asking the kernel who
dialled (chaos/socket_owner.py). A partition therefore cuts the data path, the
quorum path and broker->controller calls (heartbeats, AlterPartition) alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from raftka.chaos.proxy import ProxyNet, Route
from raftka.testing.local_cluster import (
    FAST_FAILURE_DETECTION,
    PORT_STRIDE,
    LocalCluster,
    free_port_base,
)

REAL_CLIENT_OFFSET = 50
QUORUM_BIND_HOST = "127.0.0.2"
HOST = "127.0.0.1"



def proxied_ports(base: int, nodes: int) -> list[tuple[str, int]]:
    """Every (host, port) a proxied layout at `base` needs: the proxies' and the nodes' own."""
    out = []
    for i in range(nodes):
        c = base + PORT_STRIDE * i
        out += [(HOST, c), (HOST, c + 1), (HOST, c + 2), (HOST, c + REAL_CLIENT_OFFSET),
                (QUORUM_BIND_HOST, c + 1), (QUORUM_BIND_HOST, c + 2)]
    return out


def find_port_base(nodes: int) -> int:
    return free_port_base(nodes, lambda base: proxied_ports(base, nodes))


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
            # The controller RPC belongs to the control plane: cut with the quorum path.
            self.proxies.add(Route(f"n{node.node_id}.rpc", node.node_id, "raft", (HOST, node.quorum_port + 1),
                                   (QUORUM_BIND_HOST, node.quorum_port + 1)))

    def _pids(self) -> dict[int, int]:
        return {n.process.pid: i for i, n in self.nodes.items() if n.process is not None}

    def node_properties(self, node, voters: str, secret: str) -> dict[str, str]:
        props = super().node_properties(node, voters, secret)
        props["listeners"] = (f"PLAINTEXT://{HOST}:{node.client_port + REAL_CLIENT_OFFSET},"
                              f"CONTROLLER://{QUORUM_BIND_HOST}:{node.quorum_port}")
        return {**props, **FAST_FAILURE_DETECTION}

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
