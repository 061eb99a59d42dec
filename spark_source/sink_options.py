"""Parse and validate the sink's options and the written DataFrame's columns (pure).

As in Spark's Kafka sink: columns `value` (required), `key`, `topic`,
`partition`, `headers`; other columns are ignored, as Spark does. Options:
`kafka.bootstrap.servers`, `topic` (beats the `topic` column, as in Spark) and
the `kafka.*` producer settings of raftka's producer, under Kafka's names.
Unlike Spark's sink (whose Kafka client defaults apply), idempotence is on by
default; as in Kafka's producer, setting `kafka.acks` to 0 or 1 without
`kafka.enable.idempotence` turns it off, and asking for both is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raftka.client.bootstrap import parse_bootstrap
from raftka.spark_source.kafka_options import SINK, KafkaOptionError, check_options


class SinkOptionError(KafkaOptionError):
    """An option or a column of the raftka sink is missing or has a bad value."""


# kafka.* option -> (AsyncProducer keyword, parser name)
PRODUCER_SETTINGS: dict[str, tuple[str, str]] = {
    "kafka.acks": ("acks", "acks"),
    "kafka.enable.idempotence": ("enable_idempotence", "bool"),
    "kafka.compression.type": ("compression_type", "compression"),
    "kafka.linger.ms": ("linger_ms", "non_negative"),
    "kafka.batch.size": ("batch_size", "positive"),
    "kafka.retries": ("retries", "non_negative"),
    "kafka.retry.backoff.ms": ("retry_backoff_ms", "non_negative"),
    "kafka.request.timeout.ms": ("request_timeout_ms", "positive"),
    "kafka.delivery.timeout.ms": ("delivery_timeout_ms", "positive"),
    "kafka.max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection",
                                                    "positive"),
    "kafka.client.id": ("client_id", "text"),
}
COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_BUFFER_MEMORY = 32 << 20  # Kafka's buffer.memory


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    producer: Mapping[str, Any] = field(default_factory=dict)  # AsyncProducer keywords
    buffer_memory: int = DEFAULT_BUFFER_MEMORY


def _parse(name: str, kind: str, raw: object) -> Any:
    text = str(raw).strip()
    if kind == "text":
        return text
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise SinkOptionError(f"option {name} must be 'true' or 'false', got {raw!r}")
        return text.lower() == "true"
    if kind == "acks":
        if text.lower() not in ("all", "-1", "0", "1"):
            raise SinkOptionError(f"option {name} must be 'all', '-1', '0' or '1', got {raw!r}")
        return -1 if text.lower() in ("all", "-1") else int(text)
    if kind == "compression":
        if text.lower() not in COMPRESSION:
            raise SinkOptionError(
                f"option {name} must be one of {', '.join(COMPRESSION)}, got {raw!r}")
        return text.lower()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < (1 if kind == "positive" else 0):
        what = "a positive integer" if kind == "positive" else "an integer >= 0"
        raise SinkOptionError(f"option {name} must be {what}, got {raw!r}")
    return value


def parse_sink_options(options: Mapping[str, object]) -> SinkOptions:
    """Validate `options` (keys in any case) or raise SinkOptionError naming the option."""
    opts = {str(k).lower(): v for k, v in options.items()}
    try:
        check_options(opts, SINK)
    except KafkaOptionError as exc:
        raise SinkOptionError(str(exc)) from None
    servers = str(opts.get("kafka.bootstrap.servers") or "").strip()
    if not servers:
        raise SinkOptionError("option kafka.bootstrap.servers is required (e.g. "
                              f"'127.0.0.1:9092'), got {opts.get('kafka.bootstrap.servers')!r}")
    try:
        parse_bootstrap(servers)
    except ValueError as exc:
        raise SinkOptionError(f"option kafka.bootstrap.servers: {exc}") from None
    topic = opts.get("topic")
    if topic is not None and not str(topic).strip():
        raise SinkOptionError(f"option topic must name a topic, got {topic!r}")
    producer: dict[str, Any] = {}
    for name, (keyword, kind) in PRODUCER_SETTINGS.items():
        if name in opts:
            producer[keyword] = _parse(name, kind, opts[name])
    if "enable_idempotence" not in producer:
        # Kafka's producer: idempotent by default unless a conflicting setting was asked for.
        producer["enable_idempotence"] = producer.get("acks", -1) == -1 and producer.get(
            "max_in_flight_requests_per_connection", 5) <= 5
    if producer["enable_idempotence"]:
        if producer.get("acks", -1) != -1:
            raise SinkOptionError("option kafka.enable.idempotence=true needs kafka.acks=all, got "
                                  f"kafka.acks={opts['kafka.acks']!r}")
        if producer.get("max_in_flight_requests_per_connection", 5) > 5:
            raise SinkOptionError(
                "option kafka.enable.idempotence=true allows at most 5 for "
                "kafka.max.in.flight.requests.per.connection, got "
                f"{opts['kafka.max.in.flight.requests.per.connection']!r}")
        producer["acks"] = -1
    buffer_memory = (_parse("kafka.buffer.memory", "positive", opts["kafka.buffer.memory"])
                     if "kafka.buffer.memory" in opts else DEFAULT_BUFFER_MEMORY)
    producer.setdefault("client_id", "raftka-spark-sink")
    return SinkOptions(bootstrap_servers=servers, topic=None if topic is None else str(topic).strip(),
                       producer=producer, buffer_memory=buffer_memory)


# column -> the Spark types it may have (simpleString forms)
COLUMN_TYPES = {
    "key": ("string", "binary"),
    "value": ("string", "binary"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


def check_columns(columns: Mapping[str, str], topic_option: str | None) -> None:
    """`columns` maps each column name to its Spark type (`DataType.simpleString()`).
    Raise SinkOptionError naming the first column that cannot be written."""
    lowered = {name.lower(): kind for name, kind in columns.items()}
    if "value" not in lowered:
        raise SinkOptionError("the DataFrame needs a `value` column (string or binary) to write; "
                              f"it has {', '.join(columns) or 'no columns'}")
    if topic_option is None and "topic" not in lowered:
        raise SinkOptionError("set the option topic or give the DataFrame a `topic` column (string)")
    for name, allowed in COLUMN_TYPES.items():
        kind = lowered.get(name)
        if kind is not None and kind.replace(" ", "") not in allowed:
            raise SinkOptionError(f"column {name} must be of type {' or '.join(allowed)}, got {kind}")
