"""raft_meta/config/kafka_broker_catalogue.py is what its generator makes from Kafka 4.4's jars,
and DescribeConfigs' default layer carries Kafka's defaults of the whole catalogue."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.raft_meta.config import generate_broker_catalogue, node_config
from raftka.raft_meta.config.config_synonyms import broker_defaults, with_id_synonyms
from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS
from tests.differential.kafka_jars import kafka_jars

COMMITTED = Path(generate_broker_catalogue.__file__).with_name("kafka_broker_catalogue.py")


@pytest.mark.timeout(300)
def test_the_committed_catalogue_is_what_the_generator_makes() -> None:
    libs = kafka_jars().libs  # fetched from Maven Central once, as the differential suite does
    made = generate_broker_catalogue.render(generate_broker_catalogue.dump(libs))
    assert made == COMMITTED.read_text(), (
        "regenerate: python -m raftka.raft_meta.config.generate_broker_catalogue > /tmp/c.py && "
        "cp /tmp/c.py raft_meta/config/kafka_broker_catalogue.py")


def test_the_catalogue_holds_kafkas_facts() -> None:
    public = [k for k, found in KAFKA_BROKER_CONFIGS.items() if not found.internal]
    assert len(public) == 350
    assert KAFKA_BROKER_CONFIGS["log.dirs"].dynamic is False
    assert KAFKA_BROKER_CONFIGS["num.io.threads"] == ("int", "8", False, True)
    assert KAFKA_BROKER_CONFIGS["ssl.keystore.password"].kind == "password"
    assert KAFKA_BROKER_CONFIGS["log.retention.ms"].default is None


@pytest.mark.parametrize("key, expected", [
    ("auto.leader.rebalance.enable", "true"),    # Kafka's default: raftka has no key of its own
    ("log.retention.hours", "168"),
    ("background.threads", "10"),
])
def test_the_default_layer_has_every_catalogue_default(key: str, expected: str) -> None:
    assert broker_defaults()[key] == expected


def test_keys_without_a_default_stay_out_of_the_default_layer() -> None:
    """Unless raftka acts on the key with a default of its own (process.roles)."""
    defaults = broker_defaults()
    no_default = {k for k, found in KAFKA_BROKER_CONFIGS.items() if found.default is None}
    assert not no_default & set(defaults) - set(node_config._KEYS)
    assert defaults["process.roles"] == "broker,controller"


@pytest.mark.parametrize("static, expected", [
    ({"node.id": "1"}, {"node.id": "1", "broker.id": "1"}),
    ({"broker.id": "2"}, {"broker.id": "2", "node.id": "2"}),
    ({"node.id": "1", "broker.id": "1"}, {"node.id": "1", "broker.id": "1"}),
    ({"log.dirs": "/d"}, {"log.dirs": "/d"}),
])
def test_node_id_and_broker_id_stand_for_each_other_in_the_static_layer(static, expected) -> None:
    assert with_id_synonyms(static) == expected


def test_an_empty_raftka_default_is_kafkas_null() -> None:
    assert "replica.selector.class" not in broker_defaults()  # raftka's '' means unset
