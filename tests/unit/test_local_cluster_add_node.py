"""`LocalCluster.add_node` (what `raftka cluster add-node` runs): the node's configuration,
its ports, and the next `cluster up` on the same data dir starting it again. No process runs:
these check the files and the layout (tests/integration/test_grow_cluster.py runs the nodes)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from raftka.raft_meta.config.node_config import load_node_config
from raftka.testing.local_cluster import LocalCluster, free_port_base


def _prepared(directory: Path, base: int) -> LocalCluster:
    cluster = LocalCluster(directory, 3, port_base=base, metrics=True)
    cluster.prepare()
    return cluster


def test_an_added_node_is_broker_only_with_the_next_id_and_its_ports(tmp_path: Path) -> None:
    base = free_port_base(5, offsets=(0, 1, 2, 3))
    cluster = _prepared(tmp_path, base)
    try:
        node = cluster.add_node()
        assert (node.node_id, node.client_port, node.metrics_port, node.broker_only) == (4, base + 300, base + 303, True)
        config = load_node_config(node.config_path)
        assert config.process_roles == ("broker",) and config.node_id == 4
        assert [e.name for e in config.listeners] == ["PLAINTEXT"] and config.listeners[0].port == base + 300
        assert [v.node_id for v in config.controller_quorum_voters] == [1, 2, 3]
        assert config.default_replication_factor == 3
        assert cluster.add_node().node_id == 5
    finally:
        cluster.stop()

    # The next `cluster up` on this data dir starts them again, as broker-only nodes.
    again = _prepared(tmp_path, base)
    try:
        assert sorted(again.nodes) == [1, 2, 3, 4, 5]
        assert [n.node_id for n in again.nodes.values() if n.broker_only] == [4, 5]
        assert load_node_config(again.nodes[5].config_path).process_roles == ("broker",)
    finally:
        again.stop()


def test_an_added_node_whose_port_is_taken_is_refused_and_not_added(tmp_path: Path) -> None:
    base = free_port_base(4, offsets=(0, 1, 2, 3))
    cluster = _prepared(tmp_path, base)
    squatter = socket.socket()
    try:
        squatter.bind(("127.0.0.1", base + 300))
        with pytest.raises(ValueError, match=rf"node 4's port\(s\) \[{base + 300}\] on 127.0.0.1 are in use"):
            cluster.add_node()
        assert sorted(cluster.nodes) == [1, 2, 3]
        assert not (tmp_path / "node-4").exists()
    finally:
        squatter.close()
        cluster.stop()
