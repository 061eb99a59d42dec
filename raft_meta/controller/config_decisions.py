"""AlterConfigs / IncrementalAlterConfigs as a pure controller decision: (image, request) ->
Config records, plus each refused resource's error.

Resources are topics (stored under ("topic", name)), brokers: a broker id (stored
under ("broker", "<id>")) or the empty name, Kafka's cluster-wide default (stored under
("cluster", "")), and client-metrics subscriptions (KIP-714, under ("client_metrics", name);
validated by raft_meta/config/client_metrics_configs.py). Kafka's rules:
- AlterConfigs (legacy) replaces a resource's whole set of dynamic configs: keys not named
  are deleted. IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per key
  (APPEND and SUBTRACT only for list-typed keys).
- Topic values are validated as at creation (raft_meta/config/topic_configs.py), over the topic's configs
  after the change; `min.insync.replicas` above the topic's replication factor is refused.
- Broker keys Kafka updates dynamically (`DYNAMIC_BROKER_CONFIGS`, `STORED_BROKER_CONFIGS`) are
  validated with Kafka's types and ranges; a static key (raftka's, or Kafka 4.4's catalogue's:
  raft_meta/config/kafka_broker_catalogue.py) answers INVALID_REQUEST ("cannot be updated
  dynamically"). A key Kafka does not define is stored as given, on one
  broker or the cluster-wide default (Kafka 4.4 validates only the keys it knows).
- Groups (stored under ("group", name); the group need not exist, as on Kafka): Kafka's
  `GroupConfig` keys, each within the broker's group.* bounds (`config_catalogue.validate_group`).
Errors are per resource: one refused resource does not stop the others. All records of the
request count together against MAX_RECORDS_PER_USER_OP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config import client_metrics_configs, topic_configs
from raftka.raft_meta.config.config_catalogue import (
    GROUP_BROKER_DEFAULTS,
    GROUP_CONFIGS,
    STORED_BROKER_CONFIGS,
    normalize_broker,
    validate_group,
)
from raftka.raft_meta.config.config_synonyms import DYNAMIC_BROKER_CONFIGS
from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS
from raftka.raft_meta.controller.controller_decisions import (
    MAX_RECORDS_PER_USER_OP,
    Decision,
    check_min_isr,
)
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import Config, MetadataRecord

CLIENT_METRICS = "client_metrics"  # the image's resource type of a client-metrics subscription
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # Kafka's AlterConfigOp.OpType ids
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Kafka's dynamic broker quota keys (KIP-73 replication throttles, bytes/s, a long >= 0; unset:
# Long.MAX, unthrottled). Not topic keys: validated here, acted on by broker/replication/replication_quota.py.
THROTTLED_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def broker_key_alterable(key: str, static_keys: frozenset[str]) -> bool:
    """Whether AlterConfigs may set broker key `key`: the dynamic keys raftka validates, else
    not one of raftka's static keys (`static_keys`) nor a key Kafka 4.4 defines as static."""
    if key in DYNAMIC_BROKER_CONFIGS or key in THROTTLED_RATE_KEYS or key in STORED_BROKER_CONFIGS:
        return True
    found = KAFKA_BROKER_CONFIGS.get(key)
    return key not in static_keys and (found is None or found.dynamic)


def _normalize_rate(key: str, value: str) -> str:
    text = value.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", text):
        raise _invalid(f"Invalid value {value!r} for configuration {key}: not a number of type LONG")
    rate = int(text)
    if not 0 <= rate <= 2**63 - 1:
        raise _invalid(f"Invalid value {value!r} for configuration {key}: expected a value in [0, {2**63 - 1}]")
    return str(rate)


@dataclass(frozen=True)
class ConfigOp:
    """One key of one resource: `op` is SET/DELETE/APPEND/SUBTRACT (legacy AlterConfigs: SET)."""

    name: str
    value: str | None
    op: int = SET


@dataclass(frozen=True)
class AlterResource:
    resource_type: str  # "topic", "broker", CLIENT_METRICS or "group"
    resource_name: str
    ops: tuple[ConfigOp, ...]
    incremental: bool = True


def storage_key(resource_type: str, resource_name: str) -> tuple[str, str]:
    """Where the image keeps a resource's configs (a broker's empty name is the cluster default)."""
    if resource_type == "broker" and resource_name == "":
        return ("cluster", "")
    return (resource_type, resource_name)


def _invalid(message: str) -> ControllerError:
    return ControllerError(ErrorCode.INVALID_CONFIG, message)


def _apply_ops(current: Mapping[str, str], resource: AlterResource, list_keys: frozenset[str],
               defaults: Mapping[str, str]) -> dict[str, str]:
    """The resource's configs after its ops. APPEND / SUBTRACT start from the key's default
    when the resource does not set it (Kafka's ConfigurationControlManager does the same)."""
    names = [op.name for op in resource.ops]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ControllerError(ErrorCode.INVALID_REQUEST, f"config {twice[0]!r} is named more than once for "
                                                         f"{resource.resource_type} {resource.resource_name!r}")
    after = dict(current) if resource.incremental else {}
    for op in resource.ops:
        if op.op == SET:
            if op.value is None:
                raise _invalid(f"Invalid value null for configuration {op.name}")
            after[op.name] = op.value
        elif op.op == DELETE:
            after.pop(op.name, None)
        elif op.op in (APPEND, SUBTRACT):
            if op.name not in list_keys:
                raise _invalid(f"{OP_NAMES[op.op]} is only allowed for list-typed configs; {op.name!r} is not one")
            start = after.get(op.name, defaults.get(op.name, ""))
            items = [p.strip() for p in start.split(",") if p.strip()]
            given = [p.strip() for p in (op.value or "").split(",") if p.strip()]
            if op.op == APPEND:
                items += [p for p in given if p not in items]
            else:
                items = [p for p in items if p not in given]
            if items:
                after[op.name] = ",".join(items)
            else:
                after.pop(op.name, None)
        else:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"config operation {op.op} for {op.name!r}; expected 0 (SET), "
                                                             "1 (DELETE), 2 (APPEND) or 3 (SUBTRACT)")
    return after


_TOPIC_LISTS = frozenset(k for k, d in topic_configs.TOPIC_CONFIGS.items() if d.kind == "list")
_BROKER_LISTS = frozenset(k for k, t in DYNAMIC_BROKER_CONFIGS.items() if t in _TOPIC_LISTS)
_TOPIC_DEFAULTS = {k: d.default for k, d in topic_configs.TOPIC_CONFIGS.items()}
_GROUP_LISTS = frozenset(k for k, d in GROUP_CONFIGS.items() if d.spec.kind == "list")
_GROUP_DEFAULTS = {k: d.spec.default for k, d in GROUP_CONFIGS.items()}
_BROKER_DEFAULTS = {k: topic_configs.TOPIC_CONFIGS[t].default for k, t in DYNAMIC_BROKER_CONFIGS.items()}


def replication_factor(image: MetadataImage, topic: str) -> int | None:
    found = image.topic_by_name(topic)
    if found is None or not found.partitions:
        return None
    return len(next(iter(found.partitions.values())).replicas)


def _topic_after(image: MetadataImage, resource: AlterResource) -> dict[str, str]:
    name = resource.resource_name
    if image.topic_by_name(name) is None:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    after = _apply_ops(image.configs.get(("topic", name), {}), resource, _TOPIC_LISTS, _TOPIC_DEFAULTS)
    try:
        after = topic_configs.validate(after)
    except topic_configs.TopicConfigError as exc:
        raise _invalid(str(exc)) from None
    check_min_isr(name, after, replication_factor(image, name))
    return after


def _broker_after(image: MetadataImage, resource: AlterResource, static_keys: frozenset[str]) -> dict[str, str]:
    name = resource.resource_name
    if name != "" and not (name.isdigit() and len(name) <= 10):
        raise _invalid(f"broker resource name {name!r}; expected a broker id or the empty name "
                       "(the cluster-wide default)")
    after = _apply_ops(image.configs.get(storage_key("broker", name), {}), resource, _BROKER_LISTS,
                      _BROKER_DEFAULTS)
    for key in after:
        if not broker_key_alterable(key, static_keys):
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"broker config {key!r} cannot be updated dynamically; "
                                                             "set it in server.properties and restart the broker")
    out = {}
    for key, value in after.items():
        if key in THROTTLED_RATE_KEYS:
            out[key] = _normalize_rate(key, value)
            continue
        if key not in DYNAMIC_BROKER_CONFIGS:
            try:
                out[key] = normalize_broker(key, value) if key in STORED_BROKER_CONFIGS else value
            except topic_configs.TopicConfigError as exc:
                raise _invalid(str(exc)) from None
            continue
        try:
            out[key] = topic_configs.normalize(DYNAMIC_BROKER_CONFIGS[key], value)
        except topic_configs.TopicConfigError as exc:
            raise _invalid(str(exc).replace(f"configuration {DYNAMIC_BROKER_CONFIGS[key]}:",
                                            f"configuration {key}:")) from None
    return out


def _client_metrics_after(image: MetadataImage, resource: AlterResource) -> dict[str, str]:
    after = _apply_ops(image.configs.get((CLIENT_METRICS, resource.resource_name), {}), resource,
                       client_metrics_configs.LIST_KEYS, client_metrics_configs.DEFAULTS)
    try:
        return client_metrics_configs.validate(resource.resource_name, after)
    except client_metrics_configs.ClientMetricsConfigError as exc:
        raise ControllerError(exc.code, exc.message) from None


def _group_after(image: MetadataImage, resource: AlterResource, bounds: Mapping[str, int]) -> dict[str, str]:
    if not resource.resource_name:
        raise ControllerError(ErrorCode.INVALID_REQUEST, "a group config resource needs a group id")
    after = _apply_ops(image.configs.get(("group", resource.resource_name), {}), resource, _GROUP_LISTS,
                       _GROUP_DEFAULTS)
    try:
        return validate_group(after, bounds)
    except topic_configs.TopicConfigError as exc:
        raise _invalid(str(exc)) from None


def alter_configs(
    image: MetadataImage, resources: Sequence[AlterResource], static_broker_keys: frozenset[str] = frozenset(),
    group_bounds: Mapping[str, int] = GROUP_BROKER_DEFAULTS,
) -> tuple[Decision, dict[int, ControllerError]]:
    """Config records for every resource that can be changed, and the error of each that
    cannot (by position in `resources`). A resource named twice is INVALID_REQUEST.
    Over MAX_RECORDS_PER_USER_OP the whole request is refused (POLICY_VIOLATION, raised)."""
    errors: dict[int, ControllerError] = {}
    keys = [storage_key(r.resource_type, r.resource_name) for r in resources]
    records: list[MetadataRecord] = []
    for i, resource in enumerate(resources):
        try:
            if keys.count(keys[i]) > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"{resource.resource_type} {resource.resource_name!r} is "
                                                                 "named more than once in the request")
            if resource.resource_type == "topic":
                after = _topic_after(image, resource)
            elif resource.resource_type == "broker":
                after = _broker_after(image, resource, static_broker_keys)
            elif resource.resource_type == CLIENT_METRICS:
                after = _client_metrics_after(image, resource)
            elif resource.resource_type == "group":
                after = _group_after(image, resource, group_bounds)
            else:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type!r}; expected "
                                                                 f"topic, broker, {CLIENT_METRICS} or group")
        except ControllerError as exc:
            errors[i] = exc
            continue
        kind, name = keys[i]
        before = image.configs.get(keys[i], {})
        records.extend(Config(kind, name, key, None) for key in sorted(before) if key not in after)
        records.extend(Config(kind, name, key, value) for key, value in sorted(after.items())
                       if before.get(key) != value)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        raise ControllerError(ErrorCode.POLICY_VIOLATION, f"altering {len(resources)} resource(s) would write {len(records)} "
                                                          f"metadata records; one request may write at most "
                                                          f"{MAX_RECORDS_PER_USER_OP} (Kafka's MAX_RECORDS_PER_USER_OP)")
    return Decision(tuple(records)), errors
