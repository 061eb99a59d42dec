"""Parse and validate the source's options (pure: no I/O, no Spark).

Option names and meanings mirror Spark's built-in Kafka source so a job can
switch by changing the format name. Spark hands options over as a
case-insensitive mapping; we read them lowercased. Every bad value raises
`SourceOptionError` naming the option, the value received and what was
expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from raftka.client.bootstrap import parse_bootstrap
from raftka.client.security import ClientSecurity
from raftka.spark_source.kafka_options import SOURCE, KafkaOptionError, check_options

EARLIEST = -2  # Kafka's ListOffsets sentinels, also used in offset JSON
LATEST = -1

TopicPartitionKey = tuple[str, int]


class SourceOptionError(KafkaOptionError):
    """An option of the raftka data source is missing or has a bad value."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind: "earliest" | "latest" | "offsets" (per partition, -2/-1 allowed) |
    "timestamp" (one epoch-ms for every partition) | "timestamps" (per partition).
    """

    kind: str
    timestamp: int | None = None
    per_partition: tuple[tuple[TopicPartitionKey, int], ...] = ()

    def as_dict(self) -> dict[TopicPartitionKey, int]:
        return dict(self.per_partition)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()
    starting: OffsetSpec | None = None  # None: the mode's default (batch earliest, stream latest)
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    fetch_max_bytes: int = 50 << 20
    max_partition_fetch_bytes: int = 4 << 20
    request_timeout_ms: int = 30000
    client_id: str = "raftka-spark"
    # kafka.isolation.level: 0 read_uncommitted (Spark's default), 1 read_committed (ends are
    # planned at the last stable offset; aborted transactions are dropped).
    isolation_level: int = 0
    # kafka.security.protocol, kafka.sasl.*, kafka.ssl.* (client/security.py), as Spark's Kafka
    # source passes `kafka.`-prefixed options to its clients.
    security: ClientSecurity | None = None

    @property
    def subscription(self) -> str:
        """How the topics were chosen, for error messages."""
        if self.subscribe:
            return f"subscribe={','.join(self.subscribe)!r}"
        if self.subscribe_pattern is not None:
            return f"subscribePattern={self.subscribe_pattern!r}"
        return "assign=" + json.dumps(_assign_json(self.assign))


def _assign_json(tps: tuple[TopicPartitionKey, ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, []).append(partition)
    return out


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise SourceOptionError(f"option {name} must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise SourceOptionError(f"option {name} must be a positive integer, got {raw!r}")
    return value


def _json_object(name: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(
            f"option {name} is not valid JSON ({exc.msg} at char {exc.pos}): {raw!r}; expected "
            'e.g. {"topic":{"0":23,"1":-2}}') from None
    if not isinstance(value, dict):
        raise SourceOptionError(
            f"option {name} must be a JSON object like {{\"topic\":{{\"0\":23}}}}, got {raw!r}")
    return value


def _per_partition(name: str, raw: str, *, allowed_negative: tuple[int, ...]
                   ) -> tuple[tuple[TopicPartitionKey, int], ...]:
    """`{"topic": {"0": 23, "1": -2}}` as sorted ((topic, partition), value) pairs."""
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in _json_object(name, raw).items():
        if not isinstance(parts, dict):
            raise SourceOptionError(
                f"option {name}: topic {topic!r} maps to {parts!r}, expected an object of "
                "partition -> number")
        for part, value in parts.items():
            try:
                partition = int(part)
            except ValueError:
                partition = -1
            if partition < 0:
                raise SourceOptionError(
                    f"option {name}: partition {part!r} of topic {topic!r} is not a "
                    "non-negative integer")
            if not isinstance(value, int) or isinstance(value, bool) or (
                    value < 0 and value not in allowed_negative):
                expected = "an integer >= 0" + (
                    f" or one of {list(allowed_negative)}" if allowed_negative else "")
                raise SourceOptionError(
                    f"option {name}: {topic}/{partition} is {value!r}, expected {expected}")
            out[(topic, partition)] = value
    return tuple(sorted(out.items()))


def _offset_spec(options: Mapping[str, str], prefix: str, *, ending: bool) -> OffsetSpec | None:
    """startingOffsets/endingOffsets and their timestamp variants. As in Spark,
    a global timestamp beats per-partition timestamps, which beat offsets."""
    ts_name, by_ts_name, off_name = (f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp",
                                     f"{prefix}Offsets")
    raw_ts = options.get(ts_name.lower())
    if raw_ts is not None:
        try:
            ts = int(str(raw_ts).strip())
        except ValueError:
            ts = -1
        if ts < 0:
            raise SourceOptionError(
                f"option {ts_name} must be epoch milliseconds (an integer >= 0), got {raw_ts!r}")
        return OffsetSpec("timestamp", timestamp=ts)
    raw_by_ts = options.get(by_ts_name.lower())
    if raw_by_ts is not None:
        return OffsetSpec("timestamps",
                          per_partition=_per_partition(by_ts_name, raw_by_ts, allowed_negative=()))
    raw = options.get(off_name.lower())
    if raw is None:
        return None
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        if ending and text.lower() == "earliest":
            raise SourceOptionError(
                f"option {off_name} cannot be 'earliest' (the read would be empty); expected "
                "'latest' or per-partition JSON")
        return OffsetSpec(text.lower())
    if not text.startswith("{"):
        raise SourceOptionError(
            f"option {off_name} must be 'earliest', 'latest' or per-partition JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, got {raw!r}')
    allowed = (LATEST,) if ending else (EARLIEST, LATEST)
    return OffsetSpec("offsets", per_partition=_per_partition(off_name, text,
                                                              allowed_negative=allowed))


def parse_options(options: Mapping[str, str], *, streaming: bool | None = False) -> SourceOptions:
    """Validate `options` (keys in any case) into SourceOptions, or raise
    SourceOptionError naming the option at fault. `streaming=None`: batch or
    streaming is not known yet (the schema() call), so the mode's own checks wait."""
    opts = {str(k).lower(): v for k, v in options.items()}
    try:
        check_options(opts, SOURCE)
    except KafkaOptionError as exc:
        raise SourceOptionError(str(exc)) from None
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "latest")).strip().lower()
    if strategy != "latest":
        raise SourceOptionError(
            "option startingOffsetsByTimestampStrategy must be 'latest' (a partition with no "
            f"record at or after the timestamp starts at its latest offset), got {strategy!r}: "
            "raftka's source has no 'error' strategy")
    servers = opts.get("kafka.bootstrap.servers")
    if not servers or not str(servers).strip():
        raise SourceOptionError(
            "option kafka.bootstrap.servers is required (e.g. '127.0.0.1:9092'), got "
            f"{servers!r}")
    try:
        parse_bootstrap(str(servers))
    except ValueError as exc:
        raise SourceOptionError(f"option kafka.bootstrap.servers: {exc}") from None

    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in opts]
    if len(chosen) != 1:
        raise SourceOptionError(
            "exactly one of the options subscribe, subscribePattern, assign must be set, got "
            + (", ".join(chosen) if chosen else "none"))
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in str(opts["subscribe"]).split(",") if t.strip())
        if not subscribe:
            raise SourceOptionError(
                f"option subscribe must name topics as a comma list, got {opts['subscribe']!r}")
    elif "subscribepattern" in opts:
        pattern = str(opts["subscribepattern"])
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError(
                f"option subscribePattern {pattern!r} is not a valid regular expression: "
                f"{exc}") from None
    else:
        parsed = _json_object("assign", str(opts["assign"]))
        pairs: set[TopicPartitionKey] = set()
        for topic, parts in parsed.items():
            if not isinstance(parts, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
                raise SourceOptionError(
                    f"option assign: topic {topic!r} maps to {parts!r}, expected a list of "
                    'partition numbers like {"topic":[0,1]}')
            pairs.update((topic, p) for p in parts)
        if not pairs:
            raise SourceOptionError(f"option assign names no partitions: {opts['assign']!r}")
        assign = tuple(sorted(pairs))

    starting = _offset_spec(opts, "starting", ending=False)
    ending = _offset_spec(opts, "ending", ending=True)
    if streaming is True and ending is not None:
        raise SourceOptionError(
            "option endingOffsets (or endingTimestamp) is for batch reads only; a streaming "
            "query reads until it is stopped (use trigger(availableNow=True) for a bounded run)")
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger", None)
    if max_per_trigger is not None and streaming is False:
        # Spark's Kafka source ignores it in batch reads; raftka ignores no option.
        raise SourceOptionError(
            "option maxOffsetsPerTrigger applies to streaming reads only (a batch read covers "
            "startingOffsets..endingOffsets)")
    return SourceOptions(
        bootstrap_servers=str(servers).strip(),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending or OffsetSpec("latest"),
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive_int(opts, "minPartitions", None),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        fetch_max_bytes=_positive_int(opts, "kafka.fetch.max.bytes", 50 << 20) or 0,
        max_partition_fetch_bytes=_positive_int(opts, "kafka.max.partition.fetch.bytes",
                                                4 << 20) or 0,
        request_timeout_ms=_positive_int(opts, "kafka.request.timeout.ms", 30000) or 0,
        client_id=str(opts.get("kafka.client.id", "raftka-spark")),
        security=_security(opts),
        isolation_level=_isolation_level(opts),
    )


ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def _isolation_level(opts: Mapping[str, str]) -> int:
    raw = str(opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
    if raw not in ISOLATION_LEVELS:
        raise SourceOptionError(
            f"option kafka.isolation.level must be read_uncommitted or read_committed, got {raw!r}")
    return ISOLATION_LEVELS[raw]


def _security(opts: Mapping[str, str]) -> ClientSecurity | None:
    """`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*` -> the client's security settings.
    Spark lowercases option names; Kafka's client keys are lower-case already."""
    props = {key[len("kafka."):]: str(value) for key, value in opts.items()
             if key == "kafka.security.protocol" or key.startswith(("kafka.sasl.", "kafka.ssl."))}
    if not props:
        return None
    try:
        return ClientSecurity.from_properties(props)
    except ValueError as exc:
        raise SourceOptionError(f"kafka.security.protocol / kafka.sasl.* / kafka.ssl.* options: {exc}") from None
