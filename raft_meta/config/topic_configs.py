"""Every topic-level config Kafka 4 defines (`TopicConfig` / `LogConfig`), its type, range and
default, and what raftka does with it.

CreateTopics, AlterConfigs and IncrementalAlterConfigs accept exactly these keys, with
Kafka's validators (types, ranges, choices and the cross-key rules of
`LogConfig.validate`); an unknown key or a bad value is refused with a message naming the
key, the value received and what was expected (the request answers INVALID_CONFIG).

`EFFECT` says what a key does in raftka:
- "applied": the log or the replication layer acts on it (see `log/config.py`,
  `effective_topic_config` below and, for the replication throttles, `broker/replication/replication_quota.py`);
- "stored": accepted, validated, stored in the metadata image and shown by DescribeConfigs
  and `raftka topics describe`, but raftka does not act on it (tiered storage, preallocation, compaction-lag and timestamp-skew bounds, jitter, the broker
  re-compressing batches to the topic's `compression.type`: see docs/operations.md, "Topic and broker configs").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftka.log.config import LOG_KEYS, LogConfig
from raftka.raft_meta.config.config_synonyms import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_SYNONYMS,
    topic_key_of,
)

if TYPE_CHECKING:
    from raftka.raft_meta.config.node_config import NodeConfig
    from raftka.raft_meta.metadata.image import MetadataImage

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
_DAY_MS = 24 * 60 * 60 * 1000

_INTEGER = re.compile(r"[+-]?[0-9]+")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One key: `kind` is Kafka's ConfigDef type (int, long, double, boolean, string, list)."""

    kind: str
    default: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    effect: str = "applied"
    expected: str = ""

    def describe(self) -> str:
        if self.expected:
            return self.expected
        if self.kind == "boolean":
            return "true or false"
        if self.choices:
            return ("a comma-separated list of " if self.kind == "list" else "one of ") + ", ".join(self.choices)
        what = {"int": "an integer", "long": "an integer", "double": "a number"}.get(self.kind, "a string")
        if self.minimum is not None and self.maximum is not None and self.maximum not in (LONG_MAX, INT_MAX):
            return f"{what} in [{_num(self.minimum)}, {_num(self.maximum)}]"
        if self.minimum is not None:
            return f"{what} >= {_num(self.minimum)}"
        return what


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _long(default: int, minimum: int | None = None, effect: str = "applied", expected: str = "") -> TopicConfigDef:
    return TopicConfigDef("long", str(default), minimum, LONG_MAX, effect=effect, expected=expected)


def _int(default: int, minimum: int | None = None, maximum: int = INT_MAX, effect: str = "applied",
         expected: str = "") -> TopicConfigDef:
    return TopicConfigDef("int", str(default), -(1 << 31) if minimum is None else minimum, maximum, effect=effect,
                          expected=expected)


def _bool(default: bool, effect: str = "stored") -> TopicConfigDef:
    return TopicConfigDef("boolean", str(default).lower(), effect=effect)


# Kafka 4's LogConfig definitions, in its order. Defaults are Kafka's (raftka's broker `log.*`
# settings override some of them: see `broker_log_defaults` below).
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "segment.bytes": _int(1 << 30, 14),  # Kafka: >= 1 MiB; raftka's tests use smaller segments
    "segment.ms": _long(7 * _DAY_MS, 1),
    "segment.jitter.ms": _long(0, 0, effect="stored"),
    "segment.index.bytes": _int(10 * 1024 * 1024, 8),
    "flush.messages": _long(LONG_MAX, 1),
    "flush.ms": _long(LONG_MAX, 0),
    "retention.bytes": _long(-1, -1, expected="-1 (unlimited) or an integer >= 0"),
    "retention.ms": _long(7 * _DAY_MS, -1, expected="-1 (forever) or an integer >= 0"),
    "max.message.bytes": _int(1048588, 0),
    "index.interval.bytes": _int(4096, 0),
    "delete.retention.ms": _long(_DAY_MS, 0),
    "min.compaction.lag.ms": _long(0, 0),
    "max.compaction.lag.ms": _long(LONG_MAX, 1, effect="stored"),
    "file.delete.delay.ms": _long(60_000, 0),
    "min.cleanable.dirty.ratio": TopicConfigDef("double", "0.5", 0.0, 1.0, effect="stored"),
    "cleanup.policy": TopicConfigDef("list", "delete", choices=("compact", "delete")),
    "unclean.leader.election.enable": _bool(False, effect="applied"),
    "min.insync.replicas": _int(1, 1),
    "compression.type": TopicConfigDef("string", "producer", choices=COMPRESSION_TYPES),
    "compression.gzip.level": _int(-1, -1, 9, effect="stored", expected="-1 (the codec's default) or 1..9"),
    "compression.lz4.level": _int(9, 1, 17, effect="stored"),
    "compression.zstd.level": _int(3, -131072, 22, effect="stored"),
    "preallocate": _bool(False),
    "message.timestamp.type": TopicConfigDef("string", "CreateTime", choices=("CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": _long(LONG_MAX, 0, effect="stored"),
    "message.timestamp.after.max.ms": _long(3_600_000, 0, effect="stored"),
    "leader.replication.throttled.replicas": TopicConfigDef(
        "list", "", effect="applied", expected="'*' or a comma-separated list of partition:brokerId"),
    "follower.replication.throttled.replicas": TopicConfigDef(
        "list", "", effect="applied", expected="'*' or a comma-separated list of partition:brokerId"),
    "remote.storage.enable": _bool(False),
    "local.retention.ms": _long(-2, -2, effect="stored"),
    "local.retention.bytes": _long(-2, -2, effect="stored"),
    "remote.log.copy.disable": _bool(False),
    "remote.log.delete.on.disable": _bool(False),
    "remote.copy.lag.ms": _long(0, -1, effect="stored", expected="-1 or an integer >= 0"),
    "remote.copy.lag.bytes": _long(-1, -1, effect="stored", expected="-1 or an integer >= 0"),
    # Kafka bounds each record of a compressed batch by it (LogValidator's maxRecordBodySize)
    "max.decompressed.message.bytes": _int(INT_MAX - 8, 1, INT_MAX - 8),
    "errors.deadletterqueue.group.enable": _bool(False, effect="applied"),  # share groups' DLQ (broker/group/share_dlq.py)
}


class TopicConfigError(ValueError):
    """A topic config that Kafka would refuse (INVALID_CONFIG); the message names key, value and rule."""


_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


def _check_throttled(key: str, text: str) -> None:
    """Kafka's ThrottledReplicaListValidator: every item (trimmed) is partitionId:brokerId or
    empty, or the items together are the literal '*'."""
    items = [p.strip() for p in text.split(",")]
    if "".join(items) == "*":
        return
    for item in items:
        if not _THROTTLED_ITEM.fullmatch(item):
            raise TopicConfigError(
                f"Invalid value {text!r} for configuration {key}: {item!r} is not partition:brokerId; "
                f"expected {TOPIC_CONFIGS[key].describe()}")


def normalize(key: str, raw: str | None) -> str:
    """The value as stored (trimmed; lists de-duplicated; booleans lower case), or TopicConfigError.
    A key the partition log acts on must also pass `LogConfig` (one rule for create, alter and
    the broker that applies it)."""
    value = _normalize(key, raw)
    if key in LOG_KEYS:
        try:
            LogConfig.from_properties({key: value})
        except ValueError as exc:
            raise TopicConfigError(f"Invalid value {raw!r} for configuration {key}: {exc}") from None
    return value


def _normalize(key: str, raw: str | None) -> str:
    spec = TOPIC_CONFIGS.get(key)
    if spec is None:
        raise TopicConfigError(f"Unknown topic config name: {key}")
    return normalize_value(key, spec, raw)


def normalize_value(key: str, spec: TopicConfigDef, raw: str | None) -> str:
    """`raw` checked against `spec` (type, range, choices) and normalised; TopicConfigError names
    `key`. The broker and group config tables (config_catalogue.py) use the same rules."""
    if raw is None:
        raise TopicConfigError(f"Invalid value null for configuration {key}: expected {spec.describe()}")
    text = str(raw).strip()

    def bad(why: str) -> TopicConfigError:
        return TopicConfigError(f"Invalid value {raw!r} for configuration {key}: {why}; expected {spec.describe()}")

    if spec.kind in ("int", "long", "double"):
        try:
            if spec.kind != "double" and not _INTEGER.fullmatch(text):
                raise ValueError(text)
            value: float = int(text) if spec.kind != "double" else float(text)
        except ValueError:
            raise bad("not a number" if spec.kind == "double" else "not an integer") from None
        if spec.kind == "double" and value != value:  # NaN
            raise bad("not a number")
        if (spec.minimum is not None and value < spec.minimum) or (spec.maximum is not None and value > spec.maximum):
            raise bad("out of range")
        if key == "compression.gzip.level" and value == 0:
            raise bad("out of range")
        return str(value)
    if spec.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise bad("not a boolean")
        return text.lower()
    if spec.kind == "list":
        items = [p.strip() for p in text.split(",") if p.strip()]
        if spec.choices:
            unknown = [p for p in items if p not in spec.choices]
            if unknown or not items:
                raise bad(f"{unknown[0]!r} is not allowed" if unknown else "empty")
            return ",".join(dict.fromkeys(items))
        _check_throttled(key, text)
        return ",".join(items)
    if spec.choices and text not in spec.choices:
        raise bad("not allowed")
    return text


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Every key normalised, then Kafka's cross-key rules over the given set (the effective
    set when altering: the caller passes the topic's configs after the change)."""
    out = {key: normalize(key, value) for key, value in configs.items()}
    check_cross_rules(out)
    return out


def check_cross_rules(values: Mapping[str, str]) -> None:
    """Kafka's `LogConfig.validate` rules between keys, for the keys present."""
    def get(key: str) -> int:
        return int(values.get(key, TOPIC_CONFIGS[key].default))

    if get("min.compaction.lag.ms") > get("max.compaction.lag.ms"):
        raise TopicConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({get('min.compaction.lag.ms')}) > "
            f"max.compaction.lag.ms ({get('max.compaction.lag.ms')})")
    if values.get("remote.storage.enable") == "true":
        raise TopicConfigError(
            "Invalid value true for configuration remote.storage.enable: tiered storage is not supported by "
            "raftka (Kafka answers the same when remote.log.storage.system.enable is false)")


# A topic's effective values: the broker's defaults (its `log.*` settings, then the dynamic
# broker configs) overlaid with the topic's own configs, which `validate` has already checked.

@dataclass(frozen=True, slots=True)
class TopicConfig:
    """What the log and the replication layer act on for one topic."""

    log: LogConfig
    min_insync_replicas: int
    unclean_leader_election: bool


def broker_log_defaults(config: NodeConfig) -> dict[str, str]:
    """The broker's `log.*` settings under their topic-level names."""
    props = {
        "segment.bytes": str(config.log_segment_bytes),
        "segment.ms": str(config.log_roll_ms),
        "segment.index.bytes": str(config.log_index_size_max_bytes),
        "index.interval.bytes": str(config.log_index_interval_bytes),
        "max.message.bytes": str(config.message_max_bytes),
        "retention.ms": str(config.log_retention_ms),
        "retention.bytes": str(config.log_retention_bytes),
        "cleanup.policy": ",".join(config.log_cleanup_policy),
        "flush.messages": str(config.log_flush_interval_messages),
    }
    if config.log_flush_interval_ms is not None:
        props["flush.ms"] = str(config.log_flush_interval_ms)
    return props


def _log_props(configs: Mapping[str, str]) -> dict[str, str]:
    """The keys the partition log acts on (the others are stored only: see `EFFECT`)."""
    return {k: v for k, v in configs.items() if k in LOG_KEYS}


def dynamic_topic_defaults(image: MetadataImage, node_id: int) -> dict[str, str]:
    """The dynamic broker configs (AlterConfigs on brokers) as topic-level defaults: the
    cluster-wide default ("broker" resource with the empty name) overlaid with this broker's own,
    under their topic keys (`log.retention.ms` -> `retention.ms`, hours and minutes converted)."""
    out: dict[str, str] = {}
    for resource in (("cluster", ""), ("broker", str(node_id))):
        chosen: dict[str, tuple[int, str]] = {}
        for key, value in image.configs.get(resource, {}).items():
            found = topic_key_of(key) if key in DYNAMIC_BROKER_CONFIGS else None
            if found is None:
                continue
            topic_key, factor = found
            if factor != 1:
                try:
                    value = str(int(value) * factor)
                except ValueError:
                    continue
            rank = -[name for name, _ in TOPIC_SYNONYMS[topic_key]].index(key)  # the first synonym wins
            if topic_key not in chosen or rank > chosen[topic_key][0]:
                chosen[topic_key] = (rank, value)
        out.update({k: v for k, (_, v) in chosen.items()})
    return out


def topic_overrides(image: MetadataImage, node_id: int, topic: str) -> dict[str, str]:
    """What overrides the static broker defaults for `topic`: dynamic broker defaults, then the
    topic's own configs (Kafka's precedence)."""
    own = image.configs.get(("topic", topic), {})
    dynamic = dynamic_topic_defaults(image, node_id) if len(image.configs) > 0 else {}
    if not dynamic:
        return own
    return {**dynamic, **own}


def effective_topic_config(config: NodeConfig, configs: Mapping[str, str]) -> TopicConfig:
    """The table's defaults, overlaid with the broker's, overlaid with `configs` (the topic's
    overrides: `topic_overrides`)."""
    props = {key: TOPIC_CONFIGS[key].default for key in sorted(LOG_KEYS)}
    props.update(broker_log_defaults(config))
    props.update(_log_props(configs))
    min_isr = int(configs.get("min.insync.replicas", config.min_insync_replicas))
    unclean_raw = configs.get("unclean.leader.election.enable")
    unclean = (
        config.unclean_leader_election_enable if unclean_raw is None else unclean_raw.lower() == "true"
    )
    return TopicConfig(LogConfig.from_properties(props), min_isr, unclean)
