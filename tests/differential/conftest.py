"""The differential suite's fixtures: Kafka 4.4's jars, and one Kafka 4.4 and one raftka cluster
(1 node each, KRaft combined mode, the same settings) started once for the package.

`--compat-full` (`make compat`) runs every scenario; without it (`make test`) the scenarios not
marked bounded in steps.py are deselected, and only the bounded part runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.testing.local_cluster import LocalCluster
from tests.differential.kafka_jars import KafkaJars, KafkaJarsUnavailable, kafka_jars
from tests.differential.kafka_server import KafkaDidNotStart, running_kafka
from tests.differential.runner import StepResult, Target, load_known, report, summary

# What both clusters are configured with (raftka's LocalCluster adds node.id, listeners, voters
# and log dirs as the Kafka fixture does): one node, so every replication factor is 1.
SHARED_SETTINGS = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "min.insync.replicas": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

RESULTS: list[StepResult] = []  # every step run in this process, for the summary


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--compat-full", action="store_true", default=False,
                     help="run every scenario of the differential suite against Kafka 4.4 "
                          "(make compat), not only the bounded part make test runs")
    parser.addoption("--compat-report", metavar="PATH", default=None,
                     help="write every step's verdict and both clusters' normalised outcomes "
                          "to PATH (JSON): what Kafka 4.4 answers, for the team's reference")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat_full: a differential scenario only make compat runs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("compat_full", default=False):
        return
    # Deselected, not skipped: `make test` runs the bounded part, and its summary must not read
    # as if something were skipped (`make compat` runs the rest).
    full_only = [item for item in items if item.get_closest_marker("compat_full") is not None]
    if full_only:
        items[:] = [item for item in items if item.get_closest_marker("compat_full") is None]
        config.hook.pytest_deselected(items=full_only)


def pytest_terminal_summary(terminalreporter) -> None:
    if RESULTS:
        terminalreporter.write_sep("=", "differential suite against Apache Kafka 4.4")
        terminalreporter.write_line(summary(RESULTS, load_known()))
        path = terminalreporter.config.getoption("compat_report", default=None)
        if path:
            Path(path).write_text(json.dumps(report(RESULTS), indent=1) + "\n")
            terminalreporter.write_line(f"every step's outcomes: {path}")


@pytest.fixture(scope="session")
def jars() -> KafkaJars:
    try:
        return kafka_jars()
    except KafkaJarsUnavailable as exc:
        reason = str(exc)
    pytest.fail(reason, pytrace=False)  # no network, no Maven: fail and say so, never skip


@pytest.fixture(scope="package")
def targets(jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, Target]]:
    """(Kafka 4.4, raftka), both running; both stopped at the end, also on failure."""
    raftka_dir = tmp_path_factory.mktemp("raftka")
    cluster = LocalCluster(raftka_dir, 1, log_level="WARNING", extra_config=SHARED_SETTINGS)
    try:
        cluster.start_and_wait(60)
        node = cluster.nodes[1]
        raftka = Target("raftka", cluster.bootstrap, {
            str(node.directory / "data"): "<log.dir>", str(node.directory / "meta"): "<metadata.log.dir>"})
        try:
            with running_kafka(tmp_path_factory.mktemp("kafka"), jars, SHARED_SETTINGS) as server:
                kafka = Target("kafka", server.bootstrap, {str(server.data_dir): "<log.dir>"})
                yield kafka, raftka
        except KafkaDidNotStart as exc:
            pytest.fail(f"Kafka 4.4 did not start: {exc}", pytrace=False)
    finally:
        cluster.stop(timeout=15)
