"""Kafka's config synonyms: the broker keys that stand for a topic key, and the chain
DescribeConfigs shows for a config (`synonyms`, v1+) with the source of its value.

The one table of which broker keys set a topic key's default, in Kafka's order of priority
(`ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS`), each with the factor that turns its
value into the topic key's unit (log.retention.hours -> ms). topic_configs.py reads it
to apply dynamic broker defaults; broker/handlers/describe_configs.py to show the chains.

The chain is Kafka's (`ConfigHelper.configSynonyms`): the names in `broker_synonyms(name)` as
found in each layer, layer by layer — dynamic per-broker, dynamic cluster-wide default, static
(server.properties), default — then everything before the first entry named `name` dropped
(so `retention.ms` on a broker where only `log.retention.hours` is set has no chain, as on
Kafka). A topic config set on the topic comes first, as DYNAMIC_TOPIC_CONFIG. The source of
a config is its chain's first entry's, DEFAULT_CONFIG when the chain is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raftka.log.config import BROKER_KEYS

# Kafka's DescribeConfigsResponse ConfigSource ids (DescribeConfigs v1+).
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000

# topic key -> its broker synonyms, highest priority first, with the factor to the topic's unit.
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                     ("log.retention.hours", _HOUR_MS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "max.decompressed.message.bytes": (("max.decompressed.message.bytes", 1),),
    "remote.copy.lag.ms": (("log.remote.copy.lag.ms", 1),),
    "remote.copy.lag.bytes": (("log.remote.copy.lag.bytes", 1),),
}

# Dynamic broker key -> the topic key whose validator checks its value (Kafka's
# DynamicBrokerConfig: the log defaults and a few replication keys are cluster-wide dynamic).
DYNAMIC_BROKER_CONFIGS: dict[str, str] = {
    **{broker_key: topic_key for topic_key, broker_key in BROKER_KEYS.items()},
    "log.retention.minutes": "retention.ms",
    "log.retention.hours": "retention.ms",
    "log.roll.hours": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.preallocate": "preallocate",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
    "log.remote.copy.lag.ms": "remote.copy.lag.ms",
    "log.remote.copy.lag.bytes": "remote.copy.lag.bytes",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
}

# Broker synonyms Kafka defines without a default (they are absent from its DEFAULT_CONFIG layer).
NO_DEFAULT = frozenset({"log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.roll.jitter.ms",
                        "log.flush.interval.ms"})


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: int


def topic_key_of(broker_key: str) -> tuple[str, int] | None:
    """The topic key a broker key sets, with the factor to the topic key's unit; None if none."""
    for topic_key, synonyms in TOPIC_SYNONYMS.items():
        for name, factor in synonyms:
            if name == broker_key:
                return topic_key, factor
    return None


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`: the keys that set the same thing as
    broker key `name`, highest priority first (log.flush.scheduler.interval.ms is only the
    fallback of log.flush.interval.ms, not the other way round)."""
    found = topic_key_of(name)
    if found is None:
        return (name,)
    names = tuple(n for n, _ in TOPIC_SYNONYMS[found[0]])
    if found[0] == "flush.ms" and name != names[0]:
        return (name,)
    return names


def config_synonyms(name: str, layers: Sequence[tuple[int, Mapping[str, str | None]]],
                    sensitive: bool = False) -> list[Synonym]:
    """The chain of broker key `name` through `layers` ((source, values), highest priority first)."""
    names = broker_synonyms(name)
    chain = [Synonym(n, None if sensitive else values[n], source)
             for source, values in layers for n in names if n in values]
    while chain and chain[0].name != name:
        chain.pop(0)
    return chain


def topic_config_synonyms(key: str, own: Mapping[str, str],
                          layers: Sequence[tuple[int, Mapping[str, str | None]]]) -> list[Synonym]:
    """The chain of topic key `key`: the topic's own value, then its first broker synonym's chain."""
    chain = [Synonym(key, own[key], DYNAMIC_TOPIC_CONFIG)] if key in own else []
    synonyms = TOPIC_SYNONYMS.get(key)
    if synonyms:
        chain += config_synonyms(synonyms[0][0], layers)
    return chain


def broker_config_synonyms(name: str, layers: Sequence[tuple[int, Mapping[str, str | None]]],
                           per_broker: bool, sensitive: bool = False) -> list[Synonym]:
    """The chain of broker key `name`; describing the cluster-wide default (not one broker),
    only its DYNAMIC_DEFAULT_BROKER_CONFIG entries, as Kafka."""
    chain = config_synonyms(name, layers, sensitive)
    if not per_broker:
        chain = [s for s in chain if s.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
    return chain


def with_id_synonyms(static: Mapping[str, str]) -> dict[str, str]:
    """server.properties as Kafka's static layer holds it: node.id and broker.id each stand for
    the other when only one is set (Kafka's `AbstractKafkaConfig.populateSynonyms`)."""
    out = dict(static)
    for name, other in (("node.id", "broker.id"), ("broker.id", "node.id")):
        if name in static and other not in static:
            out[other] = static[name]
    return out


def source_of(chain: Sequence[Synonym]) -> int:
    return chain[0].source if chain else DEFAULT_CONFIG


def synonym_default(broker_key: str) -> str:
    """The default of the topic key `broker_key` stands for, in `broker_key`'s unit
    (log.retention.hours -> 168): the topic config table is the one home of that default."""
    from raftka.raft_meta.config.topic_configs import TOPIC_CONFIGS

    found = topic_key_of(broker_key)
    if found is None:
        raise KeyError(f"{broker_key!r} is not a broker synonym of a topic key; expected one of TOPIC_SYNONYMS'")
    topic_key, factor = found
    default = TOPIC_CONFIGS[topic_key].default
    return default if factor == 1 else str(int(default) // factor)


def broker_defaults() -> dict[str, str]:
    """Kafka's DEFAULT_CONFIG layer: Kafka 4.4's default of each key of its catalogue, with
    raftka's own where raftka acts on the key (its server.properties defaults), and for a topic
    key's broker synonyms raftka has no server.properties key for, the topic key's default in
    the synonym's unit."""
    from raftka.raft_meta.config.config_catalogue import STORED_BROKER_CONFIGS
    from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS
    from raftka.raft_meta.config.node_config import _KEYS

    out = {key: found.default for key, found in KAFKA_BROKER_CONFIGS.items() if found.default is not None}
    out.update({key: spec.default for key, spec in STORED_BROKER_CONFIGS.items()})
    # raftka's own defaults of the keys it acts on; its empty default of a key Kafka has no
    # default for means unset, as Kafka's null (replica.selector.class)
    out.update({key: default for key, (_, _, default) in _KEYS.items()
                if default is not None and (default or key not in KAFKA_BROKER_CONFIGS
                                            or KAFKA_BROKER_CONFIGS[key].default is not None)})
    for synonyms in TOPIC_SYNONYMS.values():
        for name, _ in synonyms:
            if name in out or name in NO_DEFAULT or name in _KEYS:
                continue
            out[name] = synonym_default(name)
    return out
