"""Files that hold the cluster secret are readable by their owner only, from creation on."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from raftka.raft_meta.config.node_config import load_node_config
from raftka.testing.local_cluster import LocalCluster


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cluster_and_server_properties_are_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        cluster = LocalCluster(tmp_path / "data", nodes=2, port_base=20000)
        (tmp_path / "data" / "node-2").mkdir(parents=True)
        (tmp_path / "data" / "node-2" / "server.properties").write_text("stale\n")  # 0666 under umask 0
        cluster.prepare()
    finally:
        os.umask(old)
    written = [tmp_path / "data" / "cluster.properties", *(n.config_path for n in cluster.nodes.values())]
    assert {str(p): _mode(p) for p in written} == {str(p): 0o600 for p in written}
    secret = load_node_config(cluster.nodes[1].config_path, env={}).controller_quorum_secret
    assert secret is not None and len(secret) >= 16
