"""Kafka 4.4's own CLI tools, by the name of their `bin/` script, and how a step runs one.

Kafka's release ships `bin/kafka-topics.sh` and friends, which run a main class with
kafka-run-class.sh; the jars from Maven Central have the classes but not the scripts, so a tool
runs as `java -cp '<libs>/*' <MainClass> <args>` (KafkaJars.java_command) with the scripts'
logging (WARN to stderr).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.differential.kafka_jars import KafkaJars, die_with_parent

# bin/<name>.sh -> its main class in Kafka 4.4.0 (kafka-tools-4.4.0.jar).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
}

STEP_TIMEOUT_S = 120.0
TIMED_OUT = -999  # the exit status recorded for a tool killed at STEP_TIMEOUT_S


@dataclass(frozen=True)
class ToolRun:
    exit: int
    stdout: str
    stderr: str


def run_tool(jars: KafkaJars, tool: str, args: list[str], *, stdin: str | None = None,
             cwd: Path | None = None) -> ToolRun:
    """Run Kafka's `tool` with `args`; a run over STEP_TIMEOUT_S is killed and answers TIMED_OUT.
    The tool `python` runs `args[0]` as a program in this interpreter, with `args[1:]` as argv
    (tests/differential/client_steps.py)."""
    if tool == "python":
        command = [sys.executable, "-c", *args]
    else:
        command = [*jars.java_command(TOOLS[tool]), *args]
    try:
        done = subprocess.run(command, input=stdin if stdin is not None else "", capture_output=True,
                              text=True, timeout=STEP_TIMEOUT_S, cwd=cwd,
                              preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired as exc:
        return ToolRun(TIMED_OUT, _text(exc.stdout), _text(exc.stderr) + f"\ntimed out after {STEP_TIMEOUT_S:.0f}s")
    return ToolRun(done.returncode, done.stdout, done.stderr)


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
