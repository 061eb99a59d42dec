"""A one-node Apache Kafka 4.4 in KRaft combined mode (process.roles=broker,controller), as a
real JVM on 127.0.0.1, formatted with Kafka's own StorageTool. Stopped on exit, also on failure.

Its server.properties mirror a raftka LocalCluster node's: node.id 1, a static
controller.quorum.voters, a PLAINTEXT client listener and a CONTROLLER listener, plus the
settings both clusters share (`SHARED_SETTINGS` in tests/differential/conftest.py).
"""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from raftka.testing.local_cluster import free_low_port
from tests.differential.kafka_jars import KafkaJars, die_with_parent

SERVER_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
READY_LINE = "Kafka Server started"
NODE_ID = 1
SERVER_HEAP = "512m"


class KafkaDidNotStart(RuntimeError):
    pass


class KafkaServer:
    def __init__(self, directory: Path, jars: KafkaJars, settings: Mapping[str, str]) -> None:
        self.directory = directory
        self.jars = jars
        self.data_dir = directory / "data"
        self.log_path = directory / "server.log"
        used: set[int] = set()
        self.client_port = free_low_port(used)
        self.controller_port = free_low_port(used)
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.properties = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.client_port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.client_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            **settings,
        }
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def _format(self) -> None:
        config = self.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        # `--cluster-id=ID`: a random id may start with "-", which argparse would take for an option.
        done = subprocess.run(
            [*self.jars.java_command(STORAGE_TOOL), "format", f"--cluster-id={self.cluster_id}",
             "--config", str(config)],
            capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise KafkaDidNotStart(f"kafka-storage format exited {done.returncode}: "
                                   f"{(done.stderr or done.stdout).strip()[-2000:]}")

    def start(self, timeout: float = 120.0) -> None:
        """Format the storage, start the JVM and return once it logs that it started."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._format()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*self.jars.java_command(SERVER_MAIN, heap=SERVER_HEAP, server=True),
                 str(self.directory / "server.properties")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log_path.read_text(errors="replace"):
            if self.process.poll() is not None:
                raise KafkaDidNotStart(f"Kafka exited with status {self.process.returncode} before "
                                       f"it started; see {self.log_path}:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise KafkaDidNotStart(f"Kafka did not log {READY_LINE!r} within {timeout:.0f}s; "
                                       f"see {self.log_path}:\n{self._tail()}")
            time.sleep(0.2)  # polling the log file under the deadline above

    def _tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def running_kafka(directory: Path, jars: KafkaJars, settings: Mapping[str, str],
                  attempts: int = 3) -> Iterator[KafkaServer]:
    """A started server, stopped on exit. Its ports were free when chosen; one taken before
    the JVM bound it costs a retry on new ports, in a new folder."""
    for attempt in range(1, attempts + 1):
        server = KafkaServer(directory / f"attempt-{attempt}", jars, settings)
        try:
            server.start()
            break
        except BaseException as exc:
            server.stop()
            if not isinstance(exc, KafkaDidNotStart):
                raise
            if attempt == attempts or "Address already in use" not in str(exc):
                raise
    try:
        yield server
    finally:
        server.stop()
