"""Where LocalCluster (and so `cluster up`, the pytest plugin and the chaos harness) puts a
node's metadata log: Kafka's default, the first log dir, unless told otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.raft_meta.config.node_config import load_node_config
from raftka.testing.local_cluster import LocalCluster


def _dirs(cluster: LocalCluster) -> dict[int, tuple[list[str], str]]:
    """{node: (log.dirs, metadata.log.dir)} as each node's server.properties resolves them."""
    cluster.prepare()
    try:
        configs = {i: load_node_config(n.config_path, env={}) for i, n in cluster.nodes.items()}
    finally:
        cluster.stop()
    return {i: (list(c.log_dirs), c.metadata_log_dir) for i, c in configs.items()}


@pytest.mark.parametrize("separate", [False, True])
def test_the_metadata_log_is_in_the_log_dir_unless_asked_apart(tmp_path: Path, separate: bool) -> None:
    cluster = LocalCluster(tmp_path, nodes=3, port_base=20000, separate_metadata_log_dir=separate)
    dirs = _dirs(cluster)
    for i, node in cluster.nodes.items():
        data = str(tmp_path / f"node-{i}" / "data")
        expected = str(tmp_path / f"node-{i}" / "meta") if separate else data
        assert dirs[i] == ([data], expected)
        assert node.metadata_log_dir == Path(expected)
        assert ("metadata.log.dir=" in node.config_path.read_text()) == separate


def test_a_meta_dir_formatted_before_keeps_its_journal(tmp_path: Path) -> None:
    """Earlier raftka always wrote metadata.log.dir=node-<i>/meta: that node goes on using it
    (its journal is there), the others take the default."""
    (tmp_path / "node-2" / "meta").mkdir(parents=True)
    (tmp_path / "node-2" / "meta" / "meta.properties").write_text("node.id=2\n")
    dirs = _dirs(LocalCluster(tmp_path, nodes=3, port_base=20000))
    assert dirs[2][1] == str(tmp_path / "node-2" / "meta")
    assert dirs[1][1] == str(tmp_path / "node-1" / "data") and dirs[3][1] == str(tmp_path / "node-3" / "data")
