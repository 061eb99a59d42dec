"""Kafka 4.4's config catalogue beyond the topic table: the dynamic broker configs that are
not a topic key's synonym, and the group configs (config resource type 32, KIP-848).

Broker (`STORED_BROKER_CONFIGS`): the keys of Kafka's `DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS`
that set no topic default (those are `config_synonyms.DYNAMIC_BROKER_CONFIGS`) and are not
listener or security keys. AlterConfigs accepts them with Kafka's types and ranges and stores
them; raftka does not act on a dynamic value of these (its threads, cleaner, connection limits
and remote-storage settings are read from server.properties at start), except the share
groups' dead-letter queue keys `errors.deadletterqueue.*` (effect "applied").

Group (`GROUP_CONFIGS`): Kafka's `GroupConfig`, each key with its broker synonym (the
`group.*` key whose value is the group's default). `validate_group` is Kafka's
`GroupConfig.validate`: types and ranges, then each timeout, interval and limit within the
broker's `group.*.min/max` bounds (`group_bounds`), with Kafka's messages. The KIP-848
coordinator acts on `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`;
the others are stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from raftka.raft_meta.config.topic_configs import (
    INT_MAX,
    LONG_MAX,
    TopicConfigDef,
    TopicConfigError,
    normalize_value,
)


def _int(default: int, minimum: int | None = 0, maximum: int = INT_MAX) -> TopicConfigDef:
    return TopicConfigDef("int", str(default), minimum, maximum, effect="stored")


def _long(default: int, minimum: int | None = 0) -> TopicConfigDef:
    return TopicConfigDef("long", str(default), minimum, LONG_MAX, effect="stored")


def _double(default: str, minimum: float | None = None, maximum: float | None = None) -> TopicConfigDef:
    return TopicConfigDef("double", default, minimum, maximum, effect="stored")


def _bool(default: bool) -> TopicConfigDef:
    return TopicConfigDef("boolean", str(default).lower(), effect="stored")


def _string(default: str, choices: tuple[str, ...] = ()) -> TopicConfigDef:
    return TopicConfigDef("string", default, choices=choices, effect="stored")


# Kafka 4.4's KafkaConfig definitions of these keys (type, default, validator).
STORED_BROKER_CONFIGS: dict[str, TopicConfigDef] = {
    "background.threads": _int(10, 1),
    # Acted on: the share groups' dead-letter queue (broker/group/share_dlq.py).
    "errors.deadletterqueue.auto.create.topics.enable": TopicConfigDef("boolean", "false", effect="applied"),
    "errors.deadletterqueue.topic.name.prefix": TopicConfigDef("string", "dlq.", effect="applied"),
    "follower.fetch.last.tiered.offset.enable": _bool(False),
    "group.consumer.assignment.interval.ms": _int(1000),
    "group.consumer.assignor.offload.enable": _bool(True),
    "group.coordinator.cached.buffer.max.bytes": _int(1048588, 524288),
    "group.share.assignment.interval.ms": _int(1000),
    "group.share.assignor.offload.enable": _bool(True),
    "group.streams.assignment.interval.ms": _int(1000),
    "group.streams.assignor.offload.enable": _bool(True),
    "log.cleaner.backoff.ms": _long(15000),
    "log.cleaner.dedupe.buffer.size": _long(134217728, None),
    "log.cleaner.io.buffer.load.factor": _double("0.9"),
    "log.cleaner.io.buffer.size": _int(524288),
    "log.cleaner.io.max.bytes.per.second": _double("1.7976931348623157E308"),
    "log.cleaner.threads": _int(1),
    "max.connection.creation.rate": _int(INT_MAX),
    "max.connections": _int(INT_MAX),
    "max.connections.per.ip": _int(INT_MAX),
    "max.connections.per.ip.overrides": _string(""),
    "num.io.threads": _int(8, 1),
    "num.network.threads": _int(3, 1),
    "num.recovery.threads.per.data.dir": _int(2, 1),
    "num.replica.fetchers": _int(1, 1),
    "producer.id.expiration.ms": _int(86400000, 1),
    "remote.fetch.max.wait.ms": _int(500, 1),
    "remote.list.offsets.request.timeout.ms": _long(30000, 1),
    "remote.log.index.file.cache.total.size.bytes": _long(1073741824, 1),
    "remote.log.manager.copier.thread.pool.size": _int(10, 1),
    "remote.log.manager.copy.max.bytes.per.second": _long(LONG_MAX, 1),
    "remote.log.manager.expiration.thread.pool.size": _int(10, 1),
    "remote.log.manager.fetch.max.bytes.per.second": _long(LONG_MAX, 1),
    "remote.log.manager.follower.thread.pool.size": _int(2, 1),
    "remote.log.reader.threads": _int(10, 1),
    "share.coordinator.cached.buffer.max.bytes": _int(1048588, 524288),
    "transaction.partition.verification.enable": _bool(True),
}


def normalize_broker(key: str, raw: str | None) -> str:
    return normalize_value(key, STORED_BROKER_CONFIGS[key], raw)


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    spec: TopicConfigDef
    synonym: str | None  # the broker key that holds the group's default
    internal: bool = False  # Kafka's internal configs: accepted, not described


def _group(spec: TopicConfigDef, synonym: str | None, internal: bool = False) -> GroupConfigDef:
    return GroupConfigDef(spec, synonym, internal)


_SHARE_RESETS = re.compile(r"latest|earliest|by_duration:P.+", re.IGNORECASE)

# Kafka 4.4's GroupConfig, in its order.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": _group(_int(45000, 1), "group.consumer.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": _group(_int(5000, 1), "group.consumer.heartbeat.interval.ms"),
    "consumer.assignment.interval.ms": _group(_int(1000), "group.consumer.assignment.interval.ms"),
    "consumer.assignor.offload.enable": _group(_bool(True), "group.consumer.assignor.offload.enable", True),
    "share.session.timeout.ms": _group(_int(45000, 1), "group.share.session.timeout.ms"),
    "share.heartbeat.interval.ms": _group(_int(5000, 1), "group.share.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": _group(_int(30000, 1000), "group.share.record.lock.duration.ms"),
    "share.delivery.count.limit": _group(_int(5, 2), "group.share.delivery.count.limit"),
    "share.partition.max.record.locks": _group(_int(2000, 100), "group.share.partition.max.record.locks"),
    "share.auto.offset.reset": _group(TopicConfigDef(
        "string", "latest", effect="stored",
        expected="'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'"), None),
    "share.isolation.level": _group(_string("read_uncommitted", ("read_committed", "read_uncommitted")), None),
    "share.renew.acknowledge.enable": _group(_bool(True), None),
    "share.assignment.interval.ms": _group(_int(1000), "group.share.assignment.interval.ms"),
    "share.assignor.offload.enable": _group(_bool(True), "group.share.assignor.offload.enable", True),
    "streams.session.timeout.ms": _group(_int(45000, 1), "group.streams.session.timeout.ms"),
    "streams.heartbeat.interval.ms": _group(_int(5000, 1), "group.streams.heartbeat.interval.ms"),
    "streams.num.standby.replicas": _group(_int(0), "group.streams.num.standby.replicas"),
    "streams.initial.rebalance.delay.ms": _group(_int(3000), "group.streams.initial.rebalance.delay.ms"),
    "streams.assignment.interval.ms": _group(_int(1000), "group.streams.assignment.interval.ms"),
    "streams.assignor.offload.enable": _group(_bool(True), "group.streams.assignor.offload.enable", True),
    "streams.task.offset.interval.ms": _group(_int(60000, 1), "group.streams.task.offset.interval.ms", True),
    "streams.num.warmup.replicas": _group(_int(2), "group.streams.num.warmup.replicas", True),
    "streams.rack.aware.assignment.tags": _group(TopicConfigDef("list", "", effect="stored"),
                                                 "group.streams.rack.aware.assignment.tags"),
    "streams.acceptable.recovery.lag": _group(_long(10000), "group.streams.acceptable.recovery.lag", True),
    "streams.assignor.name": _group(TopicConfigDef("string", "sticky", effect="stored"), "group.streams.assignors"),
    "errors.deadletterqueue.topic.name": _group(_string(""), None),
    "errors.deadletterqueue.copy.record.enable": _group(_bool(False), None),
}

# The broker's group.* keys that bound or default group configs, with Kafka's defaults.
GROUP_BROKER_DEFAULTS: dict[str, int] = {
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
    "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
    "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.max.standby.replicas": 2,
}

# group key -> (the broker key of its lower bound, of its upper bound), Kafka's GroupConfig.validate
_RANGES: dict[str, tuple[str, str]] = {
    f"{kind}.{what}": (f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")
    for kind in ("consumer", "share", "streams") for what in ("session.timeout.ms", "heartbeat.interval.ms")
} | {
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
}
STREAMS_ASSIGNORS = ("sticky",)  # Kafka's registered task assignors (group.streams.assignors)
MIN_TASK_OFFSET_INTERVAL_MS = 15000


def group_bounds(broker_config: Mapping[str, str]) -> dict[str, int]:
    """The broker's bounds of group configs: its server.properties values over Kafka's defaults."""
    out = dict(GROUP_BROKER_DEFAULTS)
    for key in out:
        if key in broker_config:
            try:
                out[key] = int(broker_config[key])
            except ValueError:
                pass
    return out


def validate_group(configs: Mapping[str, str | None], bounds: Mapping[str, int] = GROUP_BROKER_DEFAULTS
                   ) -> dict[str, str]:
    """A group's configs (after the change) normalised, or TopicConfigError with Kafka's message."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        found = GROUP_CONFIGS.get(key)
        if found is None:
            raise TopicConfigError(f"Unknown group config name: {key}")
        out[key] = normalize_value(key, found.spec, raw)
    for key, value in out.items():
        if key in _RANGES:
            low, high = (bounds[k] for k in _RANGES[key])
            if not low <= int(value) <= high:
                raise TopicConfigError(f"{key} must be in the range {low} to {high} inclusive.")
        elif key == "streams.num.standby.replicas" and int(value) > bounds["group.streams.max.standby.replicas"]:
            raise TopicConfigError(f"{key} must be less than or equal to {bounds['group.streams.max.standby.replicas']}")
        elif key == "streams.task.offset.interval.ms" and int(value) < MIN_TASK_OFFSET_INTERVAL_MS:
            raise TopicConfigError(f"{key} must be greater than or equal to {MIN_TASK_OFFSET_INTERVAL_MS}")
        elif key == "streams.assignor.name" and value not in STREAMS_ASSIGNORS:
            raise TopicConfigError(f"{key} '{value}' is not a registered task assignor. Registered assignors are: "
                                   f"[{', '.join(STREAMS_ASSIGNORS)}].")
        elif key == "errors.deadletterqueue.topic.name" and value.startswith("__"):
            raise TopicConfigError(f"{key}: DLQ topic name must not start with '__'")
        elif key == "share.auto.offset.reset" and not _SHARE_RESETS.fullmatch(value):
            raise TopicConfigError(
                f"Invalid value {value} for configuration {key}: Invalid value `{value}` for configuration {key}. "
                "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    return out


def group_config_value(key: str, own: Mapping[str, str], broker_config: Mapping[str, str]) -> str:
    """A group config's effective value: the group's own, else its broker synonym's, else the default."""
    if key in own:
        return own[key]
    found = GROUP_CONFIGS[key]
    if found.synonym is not None and found.synonym in broker_config:
        return broker_config[found.synonym]
    return found.spec.default
