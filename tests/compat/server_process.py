"""A one-node raftka server that tests can kill (-9) and restart on the same data and ports.

A thin view of `raftka.testing.local_cluster.LocalCluster` (the one way every
launcher starts nodes) for the restart and robustness tests: broker
properties (limits), the process, and the server's structlog records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from raftka.testing.local_cluster import LocalCluster, NodeExited
from tests.support import DEFAULT_WAIT_S, wait_until


class ServerProcess:
    """`raftka server start` on a config written once; start/kill/stop any number of times.

    The ports are chosen once, so a restarted server answers at the same bootstrap address."""

    def __init__(self, directory: Path, *, num_partitions: int = 1,
                 properties: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        self._cluster = LocalCluster(directory, 1, log_level="INFO", extra_config={
            "num.partitions": str(num_partitions),
            "group.initial.rebalance.delay.ms": "0",
            **(properties or {}),
        })
        self._cluster.prepare()
        self._node = self._cluster.nodes[1]
        self.directory = self._node.directory
        self.log_path = self._node.log_path
        self.starts = 0

    @property
    def client_port(self) -> int:
        return self._node.client_port

    @property
    def bootstrap(self) -> str:
        return self._node.bootstrap

    @property
    def proc(self):
        return self._node.process

    @property
    def pid(self) -> int:
        assert self._node.process is not None, "the server was never started"
        return self._node.process.pid

    def running(self) -> bool:
        return self._node.running

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and return once it prints the ready marker."""
        if self.running():
            raise RuntimeError(f"server pid {self.pid} is already running")
        self.starts += 1
        # Append, so a restarted server's log keeps its predecessor's for post-mortems.
        with open(self.log_path, "a") as log:
            log.write(f"---- start #{self.starts} ----\n")
        try:
            if self.starts == 1:  # ports never bound yet: one taken meanwhile is replaced by a free one
                self._cluster.start_and_wait(timeout)
            else:  # a restart answers at the same address
                self._cluster.start_node(1, wait=True, timeout=timeout)
        except (NodeExited, TimeoutError) as exc:
            self.stop()
            raise RuntimeError(f"raftka server did not become ready: {exc}") from None
        finally:
            self._node = self._cluster.nodes[1]

    def log_events(self, event: str) -> list[dict]:
        """The server's structlog records (JSON lines on stderr) named `event`, oldest first.

        What is in the file now: the server's stderr reaches it through a pipe and a reader
        thread (LocalCluster._pump), so a line written a moment ago may not be there yet. To
        check that something was logged, use `logged`."""
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

    def logged(self, event: str, match: Callable[[dict], bool] = lambda record: True,
               timeout: float = DEFAULT_WAIT_S) -> list[dict]:
        """The `event` records for which `match` holds, once there is one (the log file lags
        the server by the pipe's reader thread); fails after `timeout` s."""
        return wait_until(lambda: [r for r in self.log_events(event) if match(r)], timeout,
                          what=f"the server's log to show {event}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing is flushed by the server."""
        self._cluster.kill_node(1)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL after `timeout` s; the exit status, None if never run.
        Also frees the data dir's launcher lock (`start` takes it again)."""
        status = self._cluster.stop_node(1, timeout)
        self._cluster.stop()
        return status


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


@contextmanager
def server_with_topics(directory: Path, topics: Mapping[str, int], *,
                       offsets_partitions: int = 1) -> Iterator[ServerProcess]:
    """A started one-node server with a small `__consumer_offsets` (the group tests' layout) and
    `topics` (name -> partitions) created, stopped on exit whatever happened."""
    from tests.compat.wire_client import WireConnection

    with running_server(directory, properties={"offsets.topic.num.partitions": str(offsets_partitions),
                                               "offsets.topic.replication.factor": "1"}) as server:
        with WireConnection(server.bootstrap) as conn:
            for name, partitions in topics.items():
                assert conn.create_topic(name, partitions) == 0, name
        yield server
