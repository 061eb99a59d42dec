"""Kafka's DescribeConfigs synonym chains (raft_meta/config/config_synonyms.py), case by case."""

from __future__ import annotations

import pytest

from raftka.raft_meta.config.config_synonyms import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    broker_config_synonyms,
    broker_defaults,
    broker_synonyms,
    source_of,
    topic_config_synonyms,
    topic_key_of,
)
from raftka.raft_meta.controller.config_decisions import DYNAMIC_BROKER_CONFIGS

DEFAULTS = broker_defaults()


def layers(broker=None, cluster=None, static=None):
    return [(DYNAMIC_BROKER_CONFIG, broker or {}), (DYNAMIC_DEFAULT_BROKER_CONFIG, cluster or {}),
            (STATIC_BROKER_CONFIG, static or {}), (DEFAULT_CONFIG, DEFAULTS)]


def chain(found):
    return [(s.name, s.value, s.source) for s in found]


@pytest.mark.parametrize(("key", "own", "where", "expected"), [
    # overridden on the topic: the topic's value, then the broker synonym's chain
    ("max.message.bytes", {"max.message.bytes": "2000000"}, layers(),
     [("max.message.bytes", "2000000", DYNAMIC_TOPIC_CONFIG), ("message.max.bytes", "1048588", DEFAULT_CONFIG)]),
    ("max.message.bytes", {"max.message.bytes": "2000000"}, layers(cluster={"message.max.bytes": "3000000"},
                                                                    static={"message.max.bytes": "4000000"}),
     [("max.message.bytes", "2000000", DYNAMIC_TOPIC_CONFIG),
      ("message.max.bytes", "3000000", DYNAMIC_DEFAULT_BROKER_CONFIG),
      ("message.max.bytes", "4000000", STATIC_BROKER_CONFIG), ("message.max.bytes", "1048588", DEFAULT_CONFIG)]),
    ("segment.bytes", {}, layers(broker={"log.segment.bytes": "1000"}),
     [("log.segment.bytes", "1000", DYNAMIC_BROKER_CONFIG), ("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]),
    ("cleanup.policy", {}, layers(), [("log.cleanup.policy", "delete", DEFAULT_CONFIG)]),
    ("min.insync.replicas", {}, layers(cluster={"min.insync.replicas": "2"}, static={"min.insync.replicas": "1"}),
     [("min.insync.replicas", "2", DYNAMIC_DEFAULT_BROKER_CONFIG), ("min.insync.replicas", "1", STATIC_BROKER_CONFIG),
      ("min.insync.replicas", "1", DEFAULT_CONFIG)]),
    # log.retention.ms has no default: with only log.retention.hours set, Kafka shows no chain
    ("retention.ms", {}, layers(static={"log.retention.hours": "24"}), []),
    ("retention.ms", {"retention.ms": "5"}, layers(), [("retention.ms", "5", DYNAMIC_TOPIC_CONFIG)]),
    # log.retention.ms set: its chain, with the other units after it, layer by layer
    ("retention.ms", {}, layers(cluster={"log.retention.ms": "100", "log.retention.hours": "2"}),
     [("log.retention.ms", "100", DYNAMIC_DEFAULT_BROKER_CONFIG),
      ("log.retention.hours", "2", DYNAMIC_DEFAULT_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]),
    ("flush.ms", {}, layers(), []),
    ("delete.retention.ms", {}, layers(), [("log.cleaner.delete.retention.ms", "86400000", DEFAULT_CONFIG)]),
    ("remote.storage.enable", {}, layers(), []),  # no broker synonym
])
def test_topic_chains(key, own, where, expected):
    found = topic_config_synonyms(key, own, where)
    assert chain(found) == expected
    assert source_of(found) == (expected[0][2] if expected else DEFAULT_CONFIG)


@pytest.mark.parametrize(("name", "where", "per_broker", "expected"), [
    ("min.insync.replicas", layers(cluster={"min.insync.replicas": "1"}), False,
     [("min.insync.replicas", "1", DYNAMIC_DEFAULT_BROKER_CONFIG)]),
    ("min.insync.replicas", layers(broker={"min.insync.replicas": "2"}, cluster={"min.insync.replicas": "1"},
                                   static={"min.insync.replicas": "1"}), True,
     [("min.insync.replicas", "2", DYNAMIC_BROKER_CONFIG), ("min.insync.replicas", "1", DYNAMIC_DEFAULT_BROKER_CONFIG),
      ("min.insync.replicas", "1", STATIC_BROKER_CONFIG), ("min.insync.replicas", "1", DEFAULT_CONFIG)]),
    # a finer unit set elsewhere comes before in its layer and is dropped from the coarser key's chain
    ("log.retention.hours", layers(broker={"log.retention.ms": "5"}, static={"log.retention.hours": "24"}), True,
     [("log.retention.hours", "24", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]),
    ("log.retention.ms", layers(cluster={"log.retention.ms": "5"}, static={"log.retention.hours": "24"}), True,
     [("log.retention.ms", "5", DYNAMIC_DEFAULT_BROKER_CONFIG), ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
      ("log.retention.hours", "168", DEFAULT_CONFIG)]),
    ("controller.quorum.secret", layers(static={"controller.quorum.secret": "s"}), True,
     [("controller.quorum.secret", None, STATIC_BROKER_CONFIG)]),
])
def test_broker_chains(name, where, per_broker, expected):
    sensitive = "secret" in name
    assert chain(broker_config_synonyms(name, where, per_broker, sensitive)) == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("log.retention.hours", ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    ("log.roll.hours", ("log.roll.ms", "log.roll.hours")),
    ("log.flush.interval.ms", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    ("log.flush.scheduler.interval.ms", ("log.flush.scheduler.interval.ms",)),
    ("num.partitions", ("num.partitions",)),
])
def test_broker_synonyms(name, expected):
    assert broker_synonyms(name) == expected


def test_every_dynamic_broker_key_sets_its_topic_key_through_the_table():
    for broker_key, topic_key in DYNAMIC_BROKER_CONFIGS.items():
        assert topic_key_of(broker_key) is not None and topic_key_of(broker_key)[0] == topic_key, broker_key


def test_the_default_layer_has_kafkas_defaults_of_the_4x_and_stored_dynamic_keys():
    """Kafka 4.4's DEFAULT_CONFIG values, which DescribeConfigs shows in the synonym chains."""
    defaults = broker_defaults()
    assert defaults["log.cleaner.threads"] == "1"
    assert defaults["num.io.threads"] == "8"
    assert defaults["max.decompressed.message.bytes"] == "2147483639"
    assert (defaults["log.remote.copy.lag.ms"], defaults["log.remote.copy.lag.bytes"]) == ("0", "-1")
