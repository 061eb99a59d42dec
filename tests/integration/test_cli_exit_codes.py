"""The CLI's exit statuses against a real one-node server (cli/runner.py's table): 1 when the
cluster or its state refuses the request, 2 when the arguments or input are wrong. Every row is
a real `python -m raftka` process; tests/unit/test_cli_runner.py has the unreachable cluster
and the arguments refused before anything is sent."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.sdk_broker import RAFTKA, one_node_server, raftka_env
from tests.support import wait_until


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("exit-codes")) as address:
        created = raftka("topics", "create", "--topic", "one", "--partitions", "1", "--bootstrap-server", address)
        assert created.returncode == 0, created.stderr
        alice = raftka("users", "create", "--user", "alice", "--password", "alice-secret", "--mechanism",
                       "SCRAM-SHA-256", "--bootstrap-server", address)
        assert alice.returncode == 0, alice.stderr
        # the group coordinator answers once __consumer_offsets is loaded
        wait_until(lambda: "LOAD_IN_PROGRESS" not in raftka("groups", "describe", "--group", "idle",
                                                             "--bootstrap-server", address).stderr,
                   timeout=60, interval=0.5, what="the group coordinator")
        yield address


def raftka(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], input=stdin, capture_output=True, text=True,
                          env=raftka_env(), timeout=90)


def _plan(tmp: Path, partition: int) -> str:
    path = tmp / f"plan-{partition}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "one", "partition": partition, "replicas": [1]}]}))
    return str(path)


def _topics(tmp: Path, topic: str) -> str:
    path = tmp / f"topics-{topic}.json"
    path.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    return str(path)


# (argv, stdin, status, the one line's prefix and a part of the reason)
REFUSED = [
    (["topics", "create", "--topic", "one"], None, 1, "raftka topics create: ", "TOPIC_ALREADY_EXISTS"),
    (["topics", "describe", "--topic", "none"], None, 1, "raftka topics describe: ", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["configs", "alter", "--entity-type", "topics", "--entity-name", "none", "--add-config", "retention.ms=1"],
     None, 1, "raftka configs alter: ", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["groups", "reset-offsets", "--group", "idle", "--topic", "none", "--to-earliest", "--execute"], None, 1,
     "raftka groups reset-offsets: ", "topic 'none' does not exist"),
    (["groups", "reset-offsets", "--group", "idle", "--topic", "one:7", "--to-earliest", "--execute"], None, 1,
     "raftka groups reset-offsets: ", "'7' is not a partition of 'one'"),
    (["transactions", "describe", "--transactional-id", "none"], None, 1, "raftka transactions describe: ", ""),
    (["acls", "list"], None, 1, "raftka acls list: ", "SECURITY_DISABLED"),
    (["reassign", "generate", "--topics-to-move-json-file", "{topics_none}", "--broker-list", "1"], None, 1,
     "raftka reassign generate: ", "topics ['none'] do not exist"),
    (["reassign", "generate", "--topics-to-move-json-file", "{topics_one}", "--broker-list", "1,7"], None, 1,
     "raftka reassign generate: ", "names brokers [7] that are not in the cluster"),
    (["reassign", "execute", "--reassignment-json-file", "{plan_7}"], None, 1,
     "raftka reassign execute: ", "partitions ['one-7'] do not exist"),
    (["users", "delete", "--user", "nobody"], None, 1, "raftka users delete: ", "nobody"),
    (["users", "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-512"], None, 1, "raftka users delete: ",
     "user 'alice' has no credential for ['SCRAM-SHA-512']"),
    (["produce", "--topic", "one", "--key-separator", ":"], "nokey\n", 2, "raftka produce: ", "no key separator"),
    (["consume", "--topic", "one", "--partition", "5"], None, 2, "raftka consume: ", "has no partition 5"),
]


@pytest.mark.parametrize(("argv", "stdin", "status", "prefix", "reason"), REFUSED,
                         ids=[" ".join(r[0][:2]) + f" {i}" for i, r in enumerate(REFUSED)])
def test_refusals_exit_with_the_runner_status(bootstrap: str, tmp_path: Path, argv, stdin, status, prefix,
                                             reason) -> None:
    files = {"topics_none": _topics(tmp_path, "none"), "topics_one": _topics(tmp_path, "one"),
             "plan_7": _plan(tmp_path, 7)}
    ran = raftka(*[a.format(**files) for a in argv], "--bootstrap-server", bootstrap, stdin=stdin)
    assert ran.returncode == status, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("raftka ")]
    assert errors and errors[-1].startswith(prefix) and reason in errors[-1], ran.stderr
    assert "Traceback" not in ran.stderr
