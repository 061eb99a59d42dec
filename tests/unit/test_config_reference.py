"""docs/configuration.md is generated from node_config's key table and must match it; a
mistyped key's error names the nearest known key and the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.raft_meta.config.config_reference import render
from raftka.raft_meta.config.node_config import ConfigError, parse_node_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.quorum.voters": "1@127.0.0.1:9093", "log.dirs": "/tmp/x"}


def test_the_published_reference_is_up_to_date() -> None:
    assert DOC.read_text() == render(), (
        "docs/configuration.md is stale: python -m raftka.raft_meta.config.config_reference "
        "> docs/configuration.md")


def test_every_key_is_documented() -> None:
    from raftka.raft_meta.config import node_config

    text = DOC.read_text()
    for key in [*node_config._KEYS, *node_config._ACCEPTED_IGNORED]:
        assert f"`{key}`" in text, key


@pytest.mark.parametrize(("key", "suggestion"), [
    ("min.insync.replica", "did you mean 'min.insync.replicas'?"),
    ("log.retention.hour", "did you mean 'log.retention.hours'?"),
    ("num.partition", "did you mean 'num.partitions'?"),
    ("controller.quorum.voter", "did you mean 'controller.quorum.voters'?"),
])
def test_a_mistyped_key_suggests_the_nearest(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match="unknown config key") as caught:
        parse_node_config({**BASE, key: "2"}, env={})
    assert suggestion in str(caught.value)
    assert "docs/configuration.md" in str(caught.value)


def test_an_unrelated_key_suggests_nothing() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_node_config({**BASE, "zzz": "2"}, env={})
    assert "did you mean" not in str(caught.value)
