"""`raftka cluster up`, `quorum status --bootstrap-server` and `topics describe` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from raftka.testing.local_cluster import free_port_base
from tests.support import wait_until

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _raftka(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftka", *args], env=_env(), capture_output=True, text=True,
                          timeout=timeout)


class ClusterUp:
    """`raftka cluster up --nodes 3` as a child process; `python` and `env` choose which raftka
    (this checkout's by default; tests/packaging passes an installed wheel's)."""

    def __init__(self, data_dir: Path, port_base: int, python: str | Path = sys.executable,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(python), "-m", "raftka", "cluster", "up", "--nodes", "3", "--data-dir", str(data_dir),
             "--port-base", str(port_base), "--quiet"],
            env=_env() if env is None else env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_ready(self) -> None:
        wait_until(lambda: any("raftka cluster ready" in line for line in self.lines) or self.proc.poll() is not None,
                   timeout=90, what="cluster up to print its ready line")
        assert self.proc.poll() is None, self.proc.stderr.read()

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=60)


def _node_pids(data_dir: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "--", f"--config {data_dir}"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_cluster_up_serves_reports_and_stops_cleanly(tmp_path):
    base = free_port_base(3, offsets=(0, 1, 2, 3))  # clients, quorum, control RPC, metrics
    bootstrap = f"127.0.0.1:{base}"
    up = ClusterUp(tmp_path, base)
    try:
        up.wait_ready()
        assert f"bootstrap servers 127.0.0.1:{base},127.0.0.1:{base + 100},127.0.0.1:{base + 200}" in "".join(up.lines)
        created = _raftka("topics", "create", "--topic", "cli-demo", "--partitions", "2",
                          "--replication-factor", "3", "--bootstrap-server", bootstrap)
        assert created.returncode == 0, created.stderr
        described = _raftka("topics", "describe", "--topic", "cli-demo", "--bootstrap-server", bootstrap)
        assert described.returncode == 0, described.stderr
        assert "Partition: 0\tLeader: " in described.stdout and "LeaderEpoch: 0" in described.stdout
        assert "Replicas: " in described.stdout and "Isr: " in described.stdout
        status = _raftka("quorum", "status", "--bootstrap-server", bootstrap, "--json")
        assert status.returncode == 0, status.stderr
        quorum = json.loads(status.stdout)
        assert quorum["leader_id"] in (1, 2, 3) and quorum["leader_id"] == quorum["controller_id"]
        assert sorted(v["node_id"] for v in quorum["voters"]) == [1, 2, 3]
        assert quorum["high_watermark"] > 0
        assert up.interrupt() == 0
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
    wait_until(lambda: not _node_pids(tmp_path), timeout=30, what="every node process to exit")

    # A second `cluster up` on the same data dir finds the topic again.
    up = ClusterUp(tmp_path, base)
    try:
        up.wait_ready()
        listed = _raftka("topics", "list", "--bootstrap-server", bootstrap)
        assert "cli-demo" in listed.stdout.split()

        # Data dirs are locked: a second launcher or a second node on them is refused and writes
        # nothing (it once overwrote the running nodes' configs and ran two brokers on one log dir).
        config = tmp_path / "node-1" / "server.properties"
        before = config.read_bytes()
        again = _raftka("cluster", "up", "--nodes", "3", "--data-dir", str(tmp_path),
                        "--port-base", str(free_port_base(3, offsets=(0, 1, 2, 3))), "--quiet")
        assert again.returncode == 1
        assert f"already running in {tmp_path}" in again.stderr and f"pid {up.proc.pid}" in again.stderr
        assert config.read_bytes() == before
        node_pid = next(p for p in _node_pids(tmp_path) if f"{config}" in Path(f"/proc/{p}/cmdline").read_text())
        second = _raftka("server", "start", "--config", str(config))
        assert second.returncode == 1
        # Kafka's default layout: one log dir, holding the metadata log too
        assert f"{tmp_path / 'node-1' / 'data'} is in use by another raftka process (pid {node_pid})" \
            in second.stderr, second.stderr
        assert "cli-demo" in _raftka("topics", "list", "--bootstrap-server", bootstrap).stdout.split()
        assert up.interrupt() == 0
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
    wait_until(lambda: not _node_pids(tmp_path), timeout=30, what="every node process to exit")


def test_quorum_status_takes_at_most_one_source(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("node.id=1\n")
    result = _raftka("quorum", "status", "--bootstrap-server", "127.0.0.1:1", "--config", str(config))
    assert result.returncode == 2
    assert "at most one of --bootstrap-server or --config" in result.stderr


def test_quorum_status_defaults_to_the_usual_bootstrap_server():
    result = _raftka("quorum", "status", "--timeout", "1")
    assert "give exactly one" not in result.stderr
    assert result.returncode == 0 or "127.0.0.1:9092" in result.stderr, result.stderr


def test_cluster_up_keeps_its_banner_last_and_stops_quietly(tmp_path):
    """Under a terminal: node logs go to files (not the screen), the hints name raftka as it was
    started (here `python -m raftka`), and a Ctrl-C shutdown prints two lines, no flood."""
    from tests.integration.terminal import Terminal

    base = free_port_base(1)
    term = Terminal("cluster", "up", "--nodes", "1", "--data-dir", str(tmp_path), "--port-base", str(base),
                    env=_env())
    banner_end = b"Ctrl-C stops every node cleanly"
    try:
        term.shows(banner_end, timeout=120)
        created = _raftka("topics", "create", "--topic", "quiet-demo", "--bootstrap-server", f"127.0.0.1:{base}")
        assert created.returncode == 0, created.stderr
        log = tmp_path / "node-1" / "server.log"
        wait_until(lambda: "quiet-demo" in log.read_text(), timeout=30, what="the node to log the new topic")
        term.type(b"\x03")
        wait_until(term.exited, timeout=90, what="cluster up to exit after Ctrl-C")
    finally:
        term.close()
    assert term.status == 0, term.screen
    assert f"{sys.executable} -m raftka topics create --topic demo".encode() in term.screen
    before, after = term.screen.split(banner_end, 1)
    assert b"quiet-demo" not in term.screen and b"[node-1]" not in term.screen
    shown = [line.strip().removeprefix(b"^C") for line in after.split(b"\r\n")[1:]]
    shown = [line for line in shown if line]
    assert shown == [b"stopping the cluster ...", f"stopped; data and logs stay in {tmp_path}".encode()]


def test_a_taken_port_is_one_line_with_the_way_out(tmp_path):
    # #31: a busy 9093 printed the middle of an ExceptionGroup and a spurious signal-receiver
    # RuntimeError. Now `cluster up` checks its ports first, and `server start` says it in a line.
    import socket

    base = free_port_base(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base + 1))  # node 1's quorum port
        holder.listen()
        up = _raftka("cluster", "up", "--nodes", "1", "--data-dir", str(tmp_path / "c"), "--port-base", str(base))
        assert up.returncode == 1
        assert up.stderr.splitlines() == [up.stderr.strip()], up.stderr
        assert f"127.0.0.1:{base + 1} (node 1's quorum port) is in use" in up.stderr
        assert "--port-base" in up.stderr and "make run PORT_BASE=" in up.stderr
        # The node itself, started by hand on that layout: the quorum's bind failure, one line.
        properties = tmp_path / "c" / "node-1" / "server.properties"
        started = _raftka("server", "start", "--config", str(properties), "--format",
                          "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", timeout=120)
    assert started.returncode == 1
    assert f"could not bind 127.0.0.1:{base + 1}" in started.stderr
    assert "Traceback" not in started.stderr and "open_signal_receiver" not in started.stderr
    assert [line for line in started.stderr.splitlines() if line.startswith("raftka server start:")] == \
        [started.stderr.splitlines()[-1]]
