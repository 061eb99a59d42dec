"""A node's life at its edges: asked to stop while it is still starting."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from raftka.testing.local_cluster import LocalCluster
from tests.compat.server_process import ServerProcess
from tests.support import wait_until


def test_sigterm_during_start_up_ends_it_at_once(tmp_path: Path) -> None:
    """One voter of three can never elect a controller, so it never finishes starting;
    SIGTERM must still end it cleanly (exit 0), not wait to be SIGKILLed."""
    cluster = LocalCluster(tmp_path, 3, log_level="INFO")
    cluster.prepare()
    try:
        cluster.start_node(1)
        node = cluster.nodes[1]
        wait_until(lambda: "broker.register_retry" in node.log_path.read_text(), timeout=30,
                   what="the node to be waiting for a controller")
        assert cluster.stop_node(1, timeout=10) == 0
        # The log file lags the process by the pipe's reader thread.
        wait_until(lambda: "node.start_abandoned" in node.log_path.read_text(), timeout=15,
                   what="node.start_abandoned in the node's log")
        assert not node.ready.is_set()
    finally:
        cluster.stop()


def test_a_stopped_nodes_log_file_holds_its_last_line(tmp_path: Path) -> None:
    """stop_node/stop return once the node's reader threads have copied its last lines: its
    log file is complete then, even when the copying lags (here a slow `on_line` watcher, as a
    loaded machine's reader thread)."""
    def slow_watcher(node_id: int, line: str) -> None:
        time.sleep(0.1)  # a slow reader of each line (a backlog of seconds), not synchronisation

    cluster = LocalCluster(tmp_path, 1, log_level="INFO", on_line=slow_watcher)
    try:
        cluster.start_and_wait()
        log_path = cluster.nodes[1].log_path
        assert cluster.stop_node(1, timeout=30) == 0
        assert '"event": "node.stopped"' in log_path.read_text().splitlines()[-1]
        cluster.start_node(1, wait=True, timeout=60)
        cluster.stop()
        assert '"event": "node.stopped"' in log_path.read_text().splitlines()[-1]
    finally:
        cluster.stop()


def test_a_server_whose_chosen_port_was_taken_before_its_first_start_moves(tmp_path: Path) -> None:
    """Ports are chosen free, then bound by the node a moment later: another process (a test
    on another worker) may take one in between. The first start then moves to free ports;
    restarts keep the address."""
    server = ServerProcess(tmp_path)
    taken = server._node.quorum_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            server.start(timeout=60)
            assert server._node.quorum_port != taken
            bootstrap = server.bootstrap
            server.stop()
            server.start(timeout=60)
            assert server.bootstrap == bootstrap
        finally:
            server.stop()
