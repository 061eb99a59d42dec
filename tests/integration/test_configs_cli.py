"""`raftka configs describe|alter` and the topic configs in `topics describe`, as real processes
against a real one-node server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raftka.cli.configs import parse_add_config
from tests.integration.sdk_broker import one_node_server
from tests.integration.test_sdk_cli import raftka


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with one_node_server(tmp_path_factory.mktemp("configs-cli")) as address:
        yield address


def test_configs_alter_describe_and_topics_describe(bootstrap: str) -> None:
    b = ["--bootstrap-server", bootstrap]
    made = raftka("topics", "create", "--topic", "cfg-t", "--partitions", "1",
                  "--config", "compression.type=zstd", *b)
    assert made.returncode == 0, made.stderr
    altered = raftka("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t",
                     "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]", *b)
    assert altered.returncode == 0, altered.stderr
    assert "Completed updating config for topic cfg-t." in altered.stdout
    described = raftka("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t", *b)
    assert described.returncode == 0, described.stderr
    assert "Dynamic configs for topic cfg-t are:" in described.stdout
    assert "  retention.ms=60000 sensitive=false source=DYNAMIC_TOPIC_CONFIG" in described.stdout
    assert "  cleanup.policy=compact,delete " in described.stdout
    assert "segment.bytes" not in described.stdout  # --all shows the defaults too
    assert "segment.bytes=" in raftka("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t",
                                      "--all", *b).stdout
    topics = raftka("topics", "describe", "--topic", "cfg-t", *b)
    assert "\tConfigs: cleanup.policy=compact,delete,compression.type=zstd,retention.ms=60000" in topics.stdout

    removed = raftka("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t",
                     "--delete-config", "retention.ms", *b)
    assert removed.returncode == 0, removed.stderr
    assert "retention.ms" not in raftka("configs", "describe", "--entity-type", "topics",
                                        "--entity-name", "cfg-t", *b).stdout

    refused = raftka("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t",
                     "--add-config", "min.insync.replicas=2", *b)
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stderr and "replication factor 1" in refused.stderr

    broker = raftka("configs", "alter", "--entity-type", "brokers", "--entity-default",
                    "--add-config", "log.retention.ms=86400000", *b)
    assert broker.returncode == 0, broker.stderr
    shown = raftka("configs", "describe", "--entity-type", "brokers", "--entity-name", "1", *b)
    assert "  log.retention.ms=86400000 sensitive=false source=DYNAMIC_DEFAULT_BROKER_CONFIG" in shown.stdout
    # ... and it is the topics' default now (the partitions' effective config reads the same overlay)
    topic_all = raftka("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t", "--all", *b)
    assert "  retention.ms=86400000 sensitive=false source=DYNAMIC_DEFAULT_BROKER_CONFIG" in topic_all.stdout


def test_configs_bad_arguments_exit_2() -> None:
    no_name = raftka("configs", "alter", "--entity-type", "topics", "--add-config", "a=b")
    assert no_name.returncode == 2 and "--entity-name TOPIC" in no_name.stderr
    nothing = raftka("configs", "alter", "--entity-type", "brokers", "--entity-default")
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr
    assert raftka("configs", "alter", "--help").returncode == 0


@pytest.mark.parametrize(("text", "expected"), [
    ("a=1", {"a": "1"}),
    ("a=1,b=[x,y],c=", {"a": "1", "b": "x,y", "c": ""}),
    (" a = 1 ,", {"a": "1"}),
])
def test_parse_add_config(text: str, expected: dict) -> None:
    assert parse_add_config(text) == expected


@pytest.mark.parametrize("text", ["a", "=1", "a=[1,2", "a=1]"])
def test_parse_add_config_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_add_config(text)
