"""`raftka topics|produce|consume` as real processes against a real one-node server."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.sdk_broker import RAFTKA, one_node_server, raftka_env
from tests.support import free_port


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("cli-broker")) as address:
        yield address


def raftka(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAFTKA, *args], input=stdin, capture_output=True, text=True,
                          env=raftka_env(), timeout=60)


def test_topics_lifecycle(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    made = raftka("topics", "create", "--topic", "cli-t", "--partitions", "2",
                  "--replication-factor", "1", "--config", "retention.ms=1000", *b)
    assert made.returncode == 0, made.stderr
    again = raftka("topics", "create", "--topic", "cli-t", "--partitions", "2", *b)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert "cli-t" in raftka("topics", "list", *b).stdout.split()
    described = raftka("topics", "describe", "--topic", "cli-t", *b)
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 2" in described.stdout
    assert "\tTopic: cli-t\tPartition: 1\tLeader: 1\tLeaderEpoch: 0\tReplicas: 1\tIsr: 1" in described.stdout
    altered = raftka("topics", "alter", "--topic", "cli-t", "--partitions", "3", *b)
    assert altered.returncode == 0, altered.stderr
    assert "PartitionCount: 3" in raftka("topics", "describe", "--topic", "cli-t", *b).stdout
    assert raftka("topics", "delete", "--topic", "cli-t", *b).returncode == 0
    missing = raftka("topics", "describe", "--topic", "cli-t", *b)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_bad_config_and_unreachable_bootstrap_say_so() -> None:
    bad = raftka("topics", "create", "--topic", "x", "--config", "oops")
    assert bad.returncode == 2 and "'oops' is not key=value" in bad.stderr
    port = free_port()
    down = raftka("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert down.returncode == 1 and f"127.0.0.1:{port}" in down.stderr
    assert "no broker reachable" in down.stderr
    # The console consumer fails at once too (the SDK's consumer under it would wait).
    for command in (("consume", "--topic", "x", "--timeout-ms", "1000"),
                    ("consume", "--topic", "x", "--share-group", "g", "--max-messages", "1")):
        down = raftka(*command, "--bootstrap-server", f"127.0.0.1:{port}")
        assert down.returncode == 1 and "[CONNECTION_ERROR] no broker reachable" in down.stderr, down.stderr


def test_produce_then_consume_with_keys(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "console", "--partitions", "1", *b
                  ).returncode == 0
    produced = raftka("produce", "--topic", "console", "--key-separator", ":", "--acks", "all",
                      "--compression", "lz4", *b, stdin="k1:hello\nk2:world\nk3:a:b\n")
    assert produced.returncode == 0, produced.stderr
    consumed = raftka("consume", "--topic", "console", "--from-beginning", "--max-messages", "3",
                      "--property", "print.key=true", "--property", "key.separator=|", *b)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["k1|hello", "k2|world", "k3|a:b"]
    one = raftka("consume", "--topic", "console", "--partition", "0", "--offset", "2",
                 "--timeout-ms", "1000", *b)
    assert one.returncode == 0 and one.stdout.splitlines() == ["a:b"]


def test_console_errors_for_unknown_topic_and_bad_lines(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    assert raftka("topics", "create", "--topic", "strict", *b).returncode == 0
    bad = raftka("produce", "--topic", "strict", "--key-separator", ":", *b, stdin="nokey\n")
    assert bad.returncode == 2 and "no key separator" in bad.stderr
    gone = raftka("consume", "--topic", "does-not-exist", "--timeout-ms", "500", *b)
    assert gone.returncode == 1 and "does-not-exist" in gone.stderr
