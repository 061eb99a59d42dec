"""raftka's pytest plugin: a real Kafka-API cluster for your tests, no Docker, no JVM.

Active as soon as raftka is installed (the `pytest11` entry point). Fixtures:

- `raftka_bootstrap`: the bootstrap servers string of a running cluster, which
  is all most tests need::

      def test_roundtrip(raftka_bootstrap):
          producer = confluent_kafka.Producer({"bootstrap.servers": raftka_bootstrap})
          ...

- `raftka_cluster`: the cluster itself (`RaftkaCluster`): `.bootstrap`,
  `.create_topic(name, partitions=1, replication_factor=None, config=None)`,
  `.delete_topic(name)`, `.stop_node(i)`, `.start_node(i)`, `.kill_node(i)`,
  `.admin()` (a blocking `raftka.Admin`).
- `raftka_topic`: a factory for fresh, uniquely named topics:
  `name = raftka_topic(partitions=3)`. They are deleted after the test.
- `raftka_session_cluster`: the cluster the ini options describe, for your own
  session-scoped fixtures.

Clusters are started on first use and live for the whole test session: one
per distinct settings. By default that is one node; ask for others with a
marker, `@pytest.mark.raftka(nodes=3, config={"num.partitions": "4"})`, or for
every test with ini options `raftka_nodes = 3` and `raftka_config` (lines of
`key=value` server.properties). A node a test stopped or killed is started
again after that test, so one test's failover leaves the next a whole cluster.

Each cluster gets its own free ports and a temp dir under pytest's basetemp,
so pytest-xdist workers never share one. Nodes stop when the session ends,
and shut themselves down if the pytest process dies (kill -9 included): they
watch their launcher's pid (raftka/testing/local_cluster.py).
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from raftka.testing.local_cluster import LocalCluster

_START_TIMEOUT_S = 60.0
# Test-friendly broker settings (the same choices Kafka's own test harnesses make);
# a marker's or ini option's config overrides them.
TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("raftka_nodes", "raftka: nodes in the default test cluster (default 1)", default="1")
    parser.addini("raftka_config", "raftka: server.properties lines (key=value) for every test cluster",
                  type="linelist", default=[])
    parser.addini("raftka_log_level", "raftka: the test clusters' log level (default INFO)", default="INFO")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "raftka(nodes=1, config=None): the raftka cluster this test gets from raftka_cluster / "
                   "raftka_bootstrap / raftka_topic (nodes, and server.properties settings)")


class RaftkaCluster:
    """A running local cluster, as tests see it."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self._names = itertools.count(1)

    @property
    def bootstrap(self) -> str:
        """host:port,... of the running nodes."""
        return self._cluster.bootstrap

    @property
    def nodes(self) -> list[int]:
        return sorted(self._cluster.nodes)

    @property
    def data_dir(self):
        return self._cluster.data_dir

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None) -> str:
        """Create `name` and wait until every partition has a leader; returns the name."""
        return self._cluster.create_topic(name, partitions, replication_factor, config)

    def delete_topic(self, name: str) -> None:
        self._cluster.delete_topic(name)

    def admin(self):
        """A blocking `raftka.Admin` on this cluster (use it in a `with`)."""
        return self._cluster.admin()

    def stop_node(self, node_id: int) -> None:
        """Controlled shutdown (SIGTERM): leaderships move away first."""
        self._cluster.stop_node(node_id)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL: a crash."""
        self._cluster.kill_node(node_id)

    def start_node(self, node_id: int, timeout: float = _START_TIMEOUT_S) -> None:
        """Start a stopped or killed node again and return once it serves clients."""
        self._cluster.start_node(node_id, wait=True, timeout=timeout)

    def restore(self) -> None:
        """Start every node that is not running (after a test that stopped some)."""
        down = [i for i, n in self._cluster.nodes.items() if not n.running]
        for node_id in down:
            self._cluster.start_node(node_id)
        if down:
            self._cluster.wait_ready(_START_TIMEOUT_S, nodes=down)

    def unique_topic_name(self, prefix: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix).strip("-.")[:80] or "topic"
        return f"{safe}-{next(self._names)}-{uuid.uuid4().hex[:6]}"

    def __repr__(self) -> str:
        return f"RaftkaCluster(nodes={self.nodes}, bootstrap={self.bootstrap!r})"


class _Clusters:
    """The session's clusters, one per distinct (nodes, config), started on first use."""

    def __init__(self, factory: pytest.TempPathFactory, log_level: str) -> None:
        self._factory = factory
        self._log_level = log_level
        self._running: dict[tuple, RaftkaCluster] = {}
        self._local: list[LocalCluster] = []

    def get(self, nodes: int, config: Mapping[str, str]) -> RaftkaCluster:
        settings = {**TEST_DEFAULTS, **{str(k): str(v) for k, v in config.items()}}
        key = (nodes, tuple(sorted(settings.items())))
        cluster = self._running.get(key)
        if cluster is None:
            directory = self._factory.mktemp(f"raftka-{nodes}n")
            local = LocalCluster(directory, nodes, extra_config=settings, log_level=self._log_level)
            self._local.append(local)
            local.start_and_wait(_START_TIMEOUT_S)
            cluster = self._running[key] = RaftkaCluster(local)
        return cluster

    def stop_all(self) -> None:
        for local in self._local:
            local.stop(timeout=20)


def _ini_settings(config: pytest.Config) -> tuple[int, dict[str, str]]:
    nodes = int(config.getini("raftka_nodes") or 1)
    settings = {}
    for line in config.getini("raftka_config"):
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            if not sep:
                raise pytest.UsageError(f"raftka_config line {line!r}: expected key=value")
            settings[key.strip()] = value.strip()
    return nodes, settings


@pytest.fixture(scope="session")
def _raftka_clusters(pytestconfig: pytest.Config,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Clusters]:
    clusters = _Clusters(tmp_path_factory, str(pytestconfig.getini("raftka_log_level")).upper())
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(scope="session")
def raftka_session_cluster(pytestconfig: pytest.Config, _raftka_clusters: _Clusters) -> RaftkaCluster:
    """The cluster the ini options describe (1 node by default), for session-scoped fixtures."""
    nodes, settings = _ini_settings(pytestconfig)
    return _raftka_clusters.get(nodes, settings)


@pytest.fixture
def raftka_cluster(request: pytest.FixtureRequest, _raftka_clusters: _Clusters) -> Iterator[RaftkaCluster]:
    """The running cluster for this test: the ini options' one, or the one its
    `@pytest.mark.raftka(nodes=..., config=...)` marker asks for."""
    nodes, settings = _ini_settings(request.config)
    marker = request.node.get_closest_marker("raftka")
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.raftka takes keyword arguments: nodes=..., config={...}")
        unknown = set(marker.kwargs) - {"nodes", "config"}
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.raftka: unknown argument(s) {sorted(unknown)}; "
                                    "expected nodes=..., config={...}")
        nodes = int(marker.kwargs.get("nodes", nodes))
        settings = {**settings, **(marker.kwargs.get("config") or {})}
    cluster = _raftka_clusters.get(nodes, settings)
    yield cluster
    cluster.restore()


@pytest.fixture
def raftka_bootstrap(raftka_cluster: RaftkaCluster) -> str:
    """host:port,... of the running cluster."""
    return raftka_cluster.bootstrap


@pytest.fixture
def raftka_topic(request: pytest.FixtureRequest, raftka_cluster: RaftkaCluster) -> Iterator[Any]:
    """A factory: `raftka_topic(partitions=1, replication_factor=None, config=None)` creates a
    topic named after the test (unique in the session) and returns its name."""
    made: list[str] = []

    def make(partitions: int = 1, replication_factor: int | None = None,
             config: Mapping[str, str] | None = None) -> str:
        name = raftka_cluster.unique_topic_name(request.node.name)
        raftka_cluster.create_topic(name, partitions, replication_factor, config)
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            raftka_cluster.delete_topic(name)
        except Exception:  # the cluster may be down after a failing test; the topic goes with it
            pass


__all__ = ["RaftkaCluster", "TEST_DEFAULTS"]
