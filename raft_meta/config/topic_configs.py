"""Every topic-level config Kafka 4 defines (`TopicConfig` / `LogConfig`), its type, range and
default, and what raftka does with it.

CreateTopics, AlterConfigs and IncrementalAlterConfigs accept exactly these keys, with
Kafka's validators (types, ranges, choices and the cross-key rules of
`LogConfig.validate`); an unknown key or a bad value is refused with a message naming the
key, the value received and what was expected (the request answers INVALID_CONFIG).

`EFFECT` says what a key does in raftka:
- "applied": the log or the replication layer acts on it (see `log/config.py`,
  `broker/topic_config.py` and, for the replication throttles, `broker/replication/replication_quota.py`);
- "stored": accepted, validated, stored in the metadata image and shown by DescribeConfigs
  and `raftka topics describe`, but raftka does not act on it (tiered storage, preallocation, compaction-lag and timestamp-skew bounds, jitter, the broker
  re-compressing batches to the topic's `compression.type`: see docs/operations.md, "Topic and broker configs").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from raftka.log.config import LOG_KEYS, LogConfig

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
# settings override some of them: see `broker/topic_config.py::broker_log_defaults`).
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
}


class TopicConfigError(ValueError):
    """A topic config that Kafka would refuse (INVALID_CONFIG); the message names key, value and rule."""


def _check_throttled(key: str, text: str) -> None:
    items = [p.strip() for p in text.split(",") if p.strip()]
    if items == ["*"] or not items:
        return
    for item in items:
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
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
