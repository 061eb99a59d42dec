"""Kafka 4's topic configs (raft_meta/config/topic_configs.py): every key accepted, values validated like Kafka."""

from __future__ import annotations

import pytest

from raftka.raft_meta.config.topic_configs import (
    TOPIC_CONFIGS,
    TopicConfigError,
    normalize,
    validate,
)

# The keys of Kafka 4's TopicConfig / LogConfig a user is most likely to send (issue #18 names them).
KAFKA_KEYS = [
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable", "remote.log.copy.disable",
    "remote.log.delete.on.disable",
]


def test_every_kafka_key_is_known_with_a_valid_default() -> None:
    assert set(KAFKA_KEYS) <= set(TOPIC_CONFIGS)
    for key, spec in TOPIC_CONFIGS.items():
        assert normalize(key, spec.default) == spec.default, key


@pytest.mark.parametrize(("key", "raw", "stored"), [
    ("compression.type", "zstd", "zstd"),
    ("compression.type", " producer ", "producer"),
    ("min.cleanable.dirty.ratio", "0.1", "0.1"),
    ("min.cleanable.dirty.ratio", "1", "1.0"),
    ("max.compaction.lag.ms", "60000", "60000"),
    ("segment.jitter.ms", "0", "0"),
    ("message.timestamp.before.max.ms", "86400000", "86400000"),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("cleanup.policy", "delete, compact", "delete,compact"),
    ("preallocate", "TRUE", "true"),
    ("compression.gzip.level", "-1", "-1"),
    ("compression.zstd.level", "-5", "-5"),
    ("leader.replication.throttled.replicas", "*", "*"),
    ("follower.replication.throttled.replicas", "0:1, 1:2", "0:1,1:2"),
    ("leader.replication.throttled.replicas", "*,", "*"),  # Kafka: the items together are '*'
    ("retention.ms", "-1", "-1"),
    ("local.retention.ms", "-2", "-2"),
])
def test_accepted_values(key: str, raw: str, stored: str) -> None:
    assert normalize(key, raw) == stored


@pytest.mark.parametrize(("key", "raw", "message"), [
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ("compression.type", "brotli", "one of uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("min.cleanable.dirty.ratio", "1.5", "out of range; expected a number in [0, 1]"),
    ("min.cleanable.dirty.ratio", "half", "not a number"),
    ("max.compaction.lag.ms", "0", "out of range; expected an integer >= 1"),
    ("segment.jitter.ms", "-1", "out of range"),
    ("min.insync.replicas", "0", "out of range"),
    ("retention.ms", "-2", "-1 (forever) or an integer >= 0"),
    ("retention.bytes", "-5", "-1 (unlimited) or an integer >= 0"),  # LogConfig's range too: never stored
    ("segment.ms", "1_000", "not an integer"),
    ("max.message.bytes", "2147483648", "out of range"),
    ("preallocate", "yes", "true or false"),
    ("cleanup.policy", "delete,purge", "'purge' is not allowed"),
    ("compression.gzip.level", "0", "out of range"),
    ("compression.lz4.level", "18", "out of range"),
    ("leader.replication.throttled.replicas", "0-1", "is not partition:brokerId"),
    ("leader.replication.throttled.replicas", "0 : 1", "'0 : 1' is not partition:brokerId"),  # Kafka's regex
    ("follower.replication.throttled.replicas", "*,0:1", "'*' is not partition:brokerId"),
    ("message.timestamp.type", "create", "one of CreateTime, LogAppendTime"),
])
def test_refused_values_name_key_value_and_rule(key: str, raw: str, message: str) -> None:
    with pytest.raises(TopicConfigError) as caught:
        normalize(key, raw)
    assert message in str(caught.value)
    if key in TOPIC_CONFIGS:
        assert key in str(caught.value) and repr(raw) in str(caught.value)


@pytest.mark.parametrize(("configs", "message"), [
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"remote.storage.enable": "true"}, "tiered storage is not supported"),
])
def test_cross_key_rules(configs: dict, message: str) -> None:
    with pytest.raises(TopicConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(configs)


def test_broker_keys_take_their_topic_keys_default_from_the_table() -> None:
    """min.insync.replicas, log.retention.hours, ... default to the topic key's default in the
    broker key's unit (one home per default); Kafka's synonyms without a default have none."""
    from raftka.raft_meta.config.config_synonyms import NO_DEFAULT, TOPIC_SYNONYMS
    from raftka.raft_meta.config.node_config import _KEYS

    checked = 0
    for topic_key, synonyms in TOPIC_SYNONYMS.items():
        for broker_key, factor in synonyms:
            if broker_key not in _KEYS:
                continue
            table = TOPIC_CONFIGS[topic_key].default
            expected = table if factor == 1 else str(int(table) // factor)
            assert _KEYS[broker_key][2] == (None if broker_key in NO_DEFAULT else expected), (broker_key, topic_key)
            checked += 1
    assert checked >= 11


def test_the_log_reads_the_tables_defaults_and_ranges() -> None:
    """log/config.py (below the table in the layers) types the values the log acts on; its
    defaults and ranges must be the table's, so the table's answer is the log's."""
    from raftka.log.config import LOG_KEYS, LogConfig

    log_defaults = LogConfig().to_properties()
    for key in sorted(LOG_KEYS):
        spec = TOPIC_CONFIGS[key]
        assert log_defaults[key] == spec.default, key
        LogConfig.from_properties({key: spec.default})
        if spec.kind in ("int", "long"):
            LogConfig.from_properties({key: str(int(spec.minimum))})
            LogConfig.from_properties({key: str(int(spec.maximum))})
            for outside in (int(spec.minimum) - 1, int(spec.maximum) + 1):
                with pytest.raises(ValueError, match="out of range"):
                    LogConfig.from_properties({key: str(outside)})
        for choice in spec.choices:
            LogConfig.from_properties({key: choice})
