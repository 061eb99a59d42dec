"""A one-node raftka server process that can be killed (-9) and restarted on the same data.

`tests/integration/sdk_broker.one_node_server` formats, starts and stops in one
go; the restart and robustness tests need to kill the process and bring it back
on the same log dirs and ports, and to set broker properties (limits). This
reuses its command line, environment and ready marker.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.integration.quorum_procs import free_low_port
from tests.integration.sdk_broker import RAFTKA, READY_MARKER, raftka_env

SECRET = "compat-tests-secret-0123456789"


class ServerProcess:
    """`raftka server start` on a config written once; start/kill/stop any number of times.

    The ports are chosen once (below the ephemeral range, see `free_low_port`)
    so a restarted server answers at the same bootstrap address.
    """

    def __init__(self, directory: Path, *, num_partitions: int = 1,
                 properties: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        used: set[int] = set()
        self.client_port = free_low_port(used)
        quorum_port = free_low_port(used)
        while quorum_port + 1 in used:  # the controller RPC listens on quorum port + 1
            quorum_port = free_low_port(used)
        lines = {
            "node.id": "1",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.client_port},"
                          f"CONTROLLER://127.0.0.1:{quorum_port}"),
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"1@127.0.0.1:{quorum_port}",
            "controller.quorum.secret": SECRET,
            "log.dirs": str(directory / "data"),
            "metadata.log.dir": str(directory / "meta"),
            "num.partitions": str(num_partitions),
            "group.initial.rebalance.delay.ms": "0",
            **(properties or {}),
        }
        self.config = directory / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.log_path = directory / "server.log"
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0
        env = raftka_env()
        cluster_id = subprocess.run([*RAFTKA, "storage", "random-uuid"], env=env, check=True,
                                    capture_output=True, text=True).stdout.strip()
        subprocess.run([*RAFTKA, "storage", "format", "--config", str(self.config),
                        "--cluster-id", cluster_id], env=env, check=True, capture_output=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the server was never started"
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and return once it prints the ready marker."""
        if self.running():
            raise RuntimeError(f"server pid {self.pid} is already running")
        self.starts += 1
        # Append, so a restarted server's log keeps its predecessor's for post-mortems.
        with open(self.log_path, "a") as stderr:
            stderr.write(f"---- start #{self.starts} ----\n")
            stderr.flush()
            proc = subprocess.Popen([*RAFTKA, "server", "start", "--config", str(self.config)],
                                    stdout=subprocess.PIPE, stderr=stderr, text=True,
                                    env=raftka_env())
        self.proc = proc
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"raftka server did not become ready within {timeout}s (exit {proc.poll()}); "
                    "log tail:\n" + self.log_path.read_text()[-3000:])
            try:
                if READY_MARKER in lines.get(timeout=min(remaining, 0.5)):
                    return
            except queue.Empty:
                continue

    def log_events(self, event: str) -> list[dict]:
        """The server's structlog records (JSON lines on stderr) named `event`, oldest first."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and f'"{event}"' in line:
                try:
                    record = json.loads(line)
                except ValueError:  # a line being written right now
                    continue
                if record.get("event") == event:
                    out.append(record)
        return out

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing is flushed by the server."""
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL after `timeout` s; the exit status, None if never run."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@contextmanager
def running_server(directory: Path, *, num_partitions: int = 1,
                   properties: Mapping[str, str] | None = None) -> Iterator[ServerProcess]:
    """A started ServerProcess, stopped on exit whatever happened."""
    server = ServerProcess(directory, num_partitions=num_partitions, properties=properties)
    try:
        server.start()
        yield server
    finally:
        server.stop()
