"""Topic-level log configuration, with Kafka's keys, defaults and ranges.

`LogConfig` holds the values under Python names; `LogConfig.from_properties`
reads Kafka's dotted keys (`segment.bytes`, `retention.ms`, ...) as strings,
the way they arrive from a properties file, the CLI or CreateTopics configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's topic compression.type: "producer" keeps each batch as the producer compressed it; any
# other value makes the leader re-compress batches that arrive with a different codec.
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One partition log's settings. Field names are Kafka's keys with `_` for `.`."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    file_delete_delay_ms: int = 60_000
    compression_type: str = "producer"
    max_decompressed_message_bytes: int = INT_MAX - 8

    def __post_init__(self) -> None:
        for f in fields(self):
            spec = _SPECS[_key(f.name)]
            spec.check(_key(f.name), getattr(self, f.name))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def target_codec(self) -> int | None:
        """The codec id batches are stored with (None: as the producer sent them)."""
        if self.compression_type == "producer":
            return None
        return ("uncompressed", "gzip", "snappy", "lz4", "zstd").index(self.compression_type)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Build a config from Kafka keys; missing keys keep their defaults.

        Raises ValueError naming the key, the value and what was expected, for
        an unknown key, a value of the wrong type or one out of range.
        """
        values: dict[str, object] = {}
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise ValueError(
                    f"unknown log config key {key!r} (value {raw!r}); expected one of: "
                    + ", ".join(sorted(_SPECS))
                )
            value = spec.parse(key, raw)
            spec.check(key, value)
            values[key.replace(".", "_")] = value
        return cls(**values)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker-wide defaults (`log.roll.ms`, `log.retention.ms`, ...) from a server config.

        Keys that are not log defaults are ignored; bad values raise ValueError
        naming the broker key.
        """
        topic_props = {}
        for topic_key, broker_key in BROKER_KEYS.items():
            if broker_key in props:
                topic_props[topic_key] = props[broker_key]
        try:
            return cls.from_properties(topic_props)
        except ValueError as exc:
            message = str(exc)
            for topic_key, broker_key in BROKER_KEYS.items():
                if f"log config {topic_key}=" in message:
                    message = message.replace(f"log config {topic_key}=", f"broker config {broker_key}=")
            raise ValueError(message) from None

    def to_properties(self) -> dict[str, str]:
        """The inverse of `from_properties`: every key with its value as a string."""
        return {_key(f.name): str(getattr(self, f.name)) for f in fields(self)}


def _key(field_name: str) -> str:
    return field_name.replace("_", ".")


@dataclass(frozen=True, slots=True)
class _Spec:
    kind: type
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    expected: str = ""

    def parse(self, key: str, raw: str) -> object:
        if self.kind is int:
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ValueError(
                    f"log config {key}={raw!r} is not an integer; expected {self.describe()}"
                ) from None
        text = str(raw).strip()
        if key == "cleanup.policy":
            # Kafka accepts a list in either order ("delete,compact"); normalise it.
            parts = sorted({p.strip() for p in text.split(",") if p.strip()})
            text = ",".join(parts)
        return text

    def check(self, key: str, value: object) -> None:
        if self.kind is int:
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"log config {key}={value!r} is not an integer; expected {self.describe()}")
            if (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum
            ):
                raise ValueError(f"log config {key}={value} is out of range; expected {self.describe()}")
        elif value not in self.choices:
            raise ValueError(f"log config {key}={value!r} is not valid; expected {self.describe()}")

    def describe(self) -> str:
        if self.expected:
            return self.expected
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.maximum is None:
            return f"an integer >= {self.minimum}"
        return f"an integer in [{self.minimum}, {self.maximum}]"


# Ranges are Kafka's (TopicConfig / LogConfig validators).
_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec(int, 14, INT_MAX),
    "segment.ms": _Spec(int, 1, LONG_MAX),
    "segment.index.bytes": _Spec(int, 8, INT_MAX),
    "index.interval.bytes": _Spec(int, 0, INT_MAX),
    "max.message.bytes": _Spec(int, 0, INT_MAX),
    "retention.ms": _Spec(int, -1, LONG_MAX, expected="-1 (forever) or an integer >= 0"),
    "retention.bytes": _Spec(int, -1, LONG_MAX, expected="-1 (unlimited) or an integer >= 0"),
    "cleanup.policy": _Spec(str, choices=CLEANUP_POLICIES),
    "delete.retention.ms": _Spec(int, 0, LONG_MAX),
    "min.compaction.lag.ms": _Spec(int, 0, LONG_MAX),
    "flush.messages": _Spec(int, 1, LONG_MAX),
    "flush.ms": _Spec(int, 0, LONG_MAX),
    "message.timestamp.type": _Spec(str, choices=TIMESTAMP_TYPES),
    "file.delete.delay.ms": _Spec(int, 0, LONG_MAX),
    "compression.type": _Spec(str, choices=COMPRESSION_TYPES),
    "max.decompressed.message.bytes": _Spec(int, 1, INT_MAX - 8),
}

# Topic key -> the broker key that sets its default (Kafka's names).
BROKER_KEYS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
}

# The topic keys the partition log acts on (raft_meta/config/topic_configs.py lists every key Kafka defines).
LOG_KEYS = frozenset(_SPECS)
