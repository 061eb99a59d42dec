"""A one-node raftka server as a real process, for the SDK integration tests."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.quorum_procs import free_low_port

REPO = Path(__file__).resolve().parents[2]
RAFTKA = [sys.executable, "-m", "raftka"]
READY_MARKER = "raftka node ready"


def raftka_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAFTKA_LOG_LEVEL": "WARNING"}


@contextmanager
def one_node_server(directory: Path, *, num_partitions: int = 1,
                    start_timeout: float = 30.0) -> Iterator[str]:
    """Format storage, start `raftka server start`, yield its bootstrap address,
    and stop the process (SIGTERM, then SIGKILL) on exit."""
    used: set[int] = set()
    client_port, quorum_port = free_low_port(used), free_low_port(used)
    while quorum_port + 1 in used:  # the controller RPC listens on quorum port + 1
        quorum_port = free_low_port(used)
    config = directory / "server.properties"
    config.write_text(
        "node.id=1\n"
        f"listeners=PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{quorum_port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters=1@127.0.0.1:{quorum_port}\n"
        "controller.quorum.secret=sdk-tests-secret-0123456789\n"
        f"log.dirs={directory / 'data'}\n"
        f"metadata.log.dir={directory / 'meta'}\n"
        f"num.partitions={num_partitions}\n"
        "group.initial.rebalance.delay.ms=0\n"
    )
    env = raftka_env()
    cluster_id = subprocess.run([*RAFTKA, "storage", "random-uuid"], env=env, check=True,
                                capture_output=True, text=True).stdout.strip()
    subprocess.run([*RAFTKA, "storage", "format", "--config", str(config), "--cluster-id",
                    cluster_id], env=env, check=True, capture_output=True)
    log_path = directory / "server.log"
    with open(log_path, "w") as stderr:
        proc = subprocess.Popen([*RAFTKA, "server", "start", "--config", str(config)],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                raise RuntimeError(
                    f"raftka server did not become ready (exit {proc.poll()}); log tail:\n"
                    + log_path.read_text()[-3000:])
            try:
                if READY_MARKER in lines.get(timeout=min(remaining, 0.5)):
                    break
            except queue.Empty:
                continue
        yield f"127.0.0.1:{client_port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
