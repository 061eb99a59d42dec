"""The readme-layout groups run (tests/integration/test_readme_layout_groups.py: the documented
three-node layout with Kafka's defaults, a kill -9 of each node, two full restarts, a KIP-848
group, a share group, the SDK's transactions) with Kafka's own Java producer running
transactions at transaction.version 2 as well (tests/integration/java/TxnV2ChaosProducer.java,
kafka-clients 4.4: KIP-890 part 2, which neither the SDK nor librdkafka 2.16 speaks). Its
transactions go into the same history as the SDK's and the same checks hold (chaos/txn_checker.py:
no aborted record read, every committed one read once, none half-visible). The checks of that
module are collected here too, run against this run.

compat_full (make compat): the Java producer adds a JVM to an already long run.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from raftka.chaos.history import Op
from tests.differential.kafka_jars import TOOLS_LOG4J, java_binary, kafka_jars
from tests.integration.test_readme_layout_groups import (  # noqa: F401 - collected here, run on this run
    PARTITIONS,
    TXN_TOPIC,
    Run,
    run_scenario,
    test_a_kip848_group_consumes_everything_and_its_commits_survive,
    test_a_share_group_accepts_everything_once_and_its_state_survives,
    test_the_cluster_went_through_every_restart,
    test_transactions_are_read_committed_once_or_not_at_all,
)

pytestmark = pytest.mark.compat_full

SOURCE = Path(__file__).parents[1] / "integration" / "java" / "TxnV2ChaosProducer.java"
PROCESS = "java-tv2"
FIRST_VALUE = 10_000_000  # above every value the SDK's workload writes


class JavaTxnProducer:
    """TxnV2ChaosProducer in its own JVM, from the load's start to its stop; its lines become
    txn ops (chaos/txn_checker.py's format) under process PROCESS."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.jars = kafka_jars()
        self.classes = directory / "classes"
        subprocess.run(["javac", "-nowarn", "-cp", self.jars.classpath, "-d", str(self.classes), str(SOURCE)],
                       check=True, timeout=180)
        self.stop_file = directory / "stop"
        self.output = directory / "java-producer.out"
        self.process: subprocess.Popen | None = None

    def start(self, bootstrap: str) -> None:
        command = [java_binary(), "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", f"{self.classes}:{self.jars.classpath}",
                   "TxnV2ChaosProducer", bootstrap, f"{TXN_TOPIC}-txn", str(PARTITIONS), "readme-java-tv2",
                   str(FIRST_VALUE), str(self.stop_file)]
        with open(self.output, "w") as out, open(self.directory / "java-producer.err", "w") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err)

    def stop(self) -> list[Op]:
        assert self.process is not None
        self.stop_file.touch()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return parse(self.output.read_text())


def parse(text: str) -> list[Op]:
    """The producer's invoke/ok/fail/info lines as txn ops; a transaction it left without an
    outcome line (it was stopped) is unknown."""
    ops: list[Op] = []
    now = time.time()
    current: dict | None = None
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        if word == "invoke":
            _, intent, writes = rest.split(" ", 2)
            current = {"writes": [[int(p), int(v)] for p, v in (w.split(":") for w in writes.split(","))],
                       "intent": intent}
            ops.append(Op(PROCESS, "invoke", "txn", current, wall=now))
        elif word in ("ok", "fail", "info") and current is not None:
            ops.append(Op(PROCESS, word, "txn", current, wall=now, error=rest or None))
            current = None
    if current is not None:
        ops.append(Op(PROCESS, "info", "txn", current, wall=now, error="stopped"))
    return ops


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    directory = tmp_path_factory.mktemp("readme-txn-v2")
    return run_scenario(directory, JavaTxnProducer(directory))


def test_kafkas_java_producer_ran_transactions_through_the_restarts(run: Run) -> None:
    mine = [o for o in run.txn_history if o.process == PROCESS]
    outcomes = [(o.type, o.value["intent"]) for o in mine if o.type != "invoke"]
    assert outcomes.count(("ok", "commit")) >= 10 and outcomes.count(("ok", "abort")) >= 3, outcomes


def test_the_producer_lines_become_txn_ops() -> None:
    ops = parse("invoke 0 commit 1:10000000,2:10000001\nok 0\ninvoke 1 abort 0:10000002\nfail 1 TimeoutException\n"
                "reinit TimeoutException\ninvoke 2 commit 0:10000003\n")
    assert [(o.type, o.value["intent"]) for o in ops] == [
        ("invoke", "commit"), ("ok", "commit"), ("invoke", "abort"), ("fail", "abort"),
        ("invoke", "commit"), ("info", "commit")]
    assert ops[0].value["writes"] == [[1, 10_000_000], [2, 10_000_001]]
