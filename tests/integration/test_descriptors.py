"""File descriptors per partition: one per segment (its .log), as in Kafka."""

from __future__ import annotations

import os
import resource

import structlog

from raftka.broker.node import check_descriptor_limit
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection
from tests.support import wait_until


def _partition_files(pid: int, topic: str) -> list[str]:
    """The files under `topic`'s partition directories that process `pid` holds open."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if f"/{topic}-" in target:
            out.append(target)
    return out


def test_a_partition_costs_one_descriptor(tmp_path):
    with running_server(tmp_path) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic("many", 300) == 0
        # The logs open in the broker's worker threads; wait until all 300 are open and the
        # steady state is reached (a leader-epoch checkpoint being written holds its file for
        # a moment; one still held at the deadline fails the assertions below).
        def steady() -> list[str] | None:
            files = _partition_files(server.pid, "many")
            opened = len({os.path.dirname(p) for p in files}) >= 300
            return files if opened and len(files) == 300 and all(p.endswith(".log") for p in files) else None

        try:
            held = wait_until(steady, timeout=60, what="300 partition logs open, nothing else")
        except AssertionError:  # not steady by the deadline: the assertions below say why
            held = _partition_files(server.pid, "many")
    assert len(held) == 300, sorted(held)[:5]
    assert all(path.endswith(".log") for path in held), [p for p in held if not p.endswith(".log")][:5]


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
