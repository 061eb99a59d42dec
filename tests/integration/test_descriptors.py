"""File descriptors per partition: one per segment (its .log), as in Kafka."""

from __future__ import annotations

import os
import resource

import structlog

from raftka.broker.node import check_descriptor_limit
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection
from tests.support import wait_until


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_partition_costs_one_descriptor(tmp_path):
    with running_server(tmp_path) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic("warm-up", 1) == 0
            before = _fds(server.pid)
            assert conn.create_topic("many", 300) == 0
        # The logs open in the broker's worker threads; wait until all 300 hold their file.
        wait_until(lambda: _fds(server.pid) >= before + 300, timeout=60, what="300 partition logs open")
        grown = _fds(server.pid) - before
    assert 300 <= grown <= 330, f"{grown} descriptors for 300 one-segment partitions"


def test_a_low_open_files_limit_is_warned_about():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        with structlog.testing.capture_logs() as logs:
            check_descriptor_limit(100, 100)     # 256 + 100 + 100 fit in 1024
            check_descriptor_limit(5000, 100)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    warned = [e for e in logs if e["event"] == "node.descriptor_limit_low"]
    assert len(warned) == 1 and warned[0]["limit"] == 1024 and warned[0]["needed_at_least"] == 5356
