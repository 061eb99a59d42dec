"""DescribeConfigs for topics (effective configs, with their source), brokers, this broker's
loggers (broker/logger_levels.py), client-metrics subscriptions (KIP-714) and groups (KIP-848).

Asked to include documentation (v3+), each config gets its text in raftka's own reference
(docs/configuration.md, `config_reference.documentation`) where Kafka gives its ConfigDef's;
a logger's is always "", as Kafka's."""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.logger_levels import LEVELS
from raftka.client.protocol import DescribeConfigsResponse, ErrorCode
from raftka.raft_meta.config import client_metrics_configs, config_reference
from raftka.raft_meta.config import config_synonyms as synonyms
from raftka.raft_meta.config.config_catalogue import (
    GROUP_CONFIGS,
    group_config_value,
)
from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS
from raftka.raft_meta.config.node_config import STATIC_BROKER_KEYS as OWN_KEYS
from raftka.raft_meta.config.node_config import is_sensitive
from raftka.raft_meta.config.topic_configs import (
    TOPIC_CONFIGS,
    effective_topic_config,
    topic_overrides,
)
from raftka.raft_meta.controller.config_decisions import (
    CLIENT_METRICS,
    THROTTLED_RATE_KEYS,
    broker_key_alterable,
)
from raftka.raft_meta.security.acls import AclOperation

_DEFAULTS = synonyms.broker_defaults()

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
# The resource types whose configs have a text in docs/configuration.md (config_reference)
_DOCUMENTED = {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker", RESOURCE_GROUP: "group",
               RESOURCE_CLIENT_METRICS: "client-metrics"}
# Kafka's ConfigSource ids not in config_synonyms
DYNAMIC_BROKER_LOGGER_CONFIG = 6
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8
# Kafka's ConfigEntry.ConfigType ids (DescribeConfigs v3+)
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                 "password": 9}


def _layers(ctx, broker: str) -> list[tuple[int, dict]]:
    """Where a broker key's value can come from, highest priority first (Kafka's order)."""
    per_broker = ctx.image.configs.get(("broker", broker), {}) if broker else {}
    return [(synonyms.DYNAMIC_BROKER_CONFIG, per_broker),
            (synonyms.DYNAMIC_DEFAULT_BROKER_CONFIG, ctx.image.configs.get(("cluster", ""), {})),
            (synonyms.STATIC_BROKER_CONFIG, synonyms.with_id_synonyms(ctx.config.raw)),
            (synonyms.DEFAULT_CONFIG, _DEFAULTS)]


def _wire(chain: list[synonyms.Synonym]) -> list[dict]:
    return [{"name": s.name, "value": s.value, "source": s.source} for s in chain]


def _topic_configs(ctx, name: str, own: dict[str, str] | None = None) -> list[dict]:
    """Every config of topic `name`, as DescribeConfigs answers it. `own`: the topic's own
    configs when the image does not hold them yet (CreateTopics v5+ answers them for the topic
    it creates, or would create, as Kafka's controller does)."""
    stored = ctx.image.configs.get(("topic", name), {})
    own = stored if own is None else own
    node = ctx.config.node_id
    merged = {**topic_overrides(ctx.image, node, name), **own}
    effective = effective_topic_config(ctx.config, merged)
    values = effective.log.to_properties()
    values["min.insync.replicas"] = str(effective.min_insync_replicas)
    values["unclean.leader.election.enable"] = str(effective.unclean_leader_election).lower()
    for key, spec in TOPIC_CONFIGS.items():  # the keys raftka stores without acting on them
        values.setdefault(key, merged.get(key, spec.default))
    layers = _layers(ctx, str(node))
    out = []
    for key, value in sorted(values.items()):
        chain = synonyms.topic_config_synonyms(key, own, layers)
        spec = TOPIC_CONFIGS.get(key)
        out.append({"name": key, "value": value, "read_only": False, "config_source": synonyms.source_of(chain),
                    "is_sensitive": False, "synonyms": _wire(chain),
                    "config_type": _CONFIG_TYPES.get(spec.kind, 0) if spec else 0, "documentation": None})
    return out


def new_topic_configs(ctx, name: str, own: dict[str, str]) -> list[dict]:
    """CreateTopics v5+'s configs of a new topic: name, value, read only, source, sensitive."""
    keep = ("name", "value", "read_only", "config_source", "is_sensitive")
    return [{key: entry[key] for key in keep} for entry in _topic_configs(ctx, name, own)]


def _broker_configs(ctx, name: str) -> list[dict]:
    """A broker's configs, as Kafka's ConfigHelper describes them: every (non-internal) key of
    Kafka 4.4's catalogue and every key of server.properties, each with its value from the
    highest layer that sets it (dynamic per-broker, dynamic cluster-wide default, static,
    default), its synonyms, Kafka's type, and read-only unless Kafka can change it dynamically.
    The empty name: only the dynamic cluster-wide defaults, as Kafka describes the default
    broker resource."""
    layers = _layers(ctx, name)
    static = frozenset(ctx.config.raw) | OWN_KEYS
    keys = set(layers[1][1])
    if name:
        keys |= set(layers[0][1]) | set(ctx.config.raw)
        keys |= {key for key, found in KAFKA_BROKER_CONFIGS.items() if not found.internal}
    out = []
    for key in sorted(keys):
        found = KAFKA_BROKER_CONFIGS.get(key)
        # Kafka: a password, or a key it has no type for; raftka's own keys by their names
        sensitive = found.kind == "password" if found else key not in OWN_KEYS or is_sensitive(key)
        chain = synonyms.broker_config_synonyms(key, layers, per_broker=bool(name), sensitive=sensitive)
        value = next((values[key] for _, values in layers if key in values), None)
        # Kafka's key not in its ALL_DYNAMIC_CONFIGS, or raftka refuses to alter it
        read_only = found is None and key not in THROTTLED_RATE_KEYS or not broker_key_alterable(key, static)
        out.append({"name": key, "value": None if sensitive else value, "config_source": synonyms.source_of(chain),
                    "read_only": read_only, "is_sensitive": sensitive, "synonyms": _wire(chain),
                    "config_type": _CONFIG_TYPES.get(found.kind, 0) if found else 0, "documentation": None})
    return out


def broker_id_error(name: str, node_id: int) -> str | None:
    """Why a broker-logger resource name is not this broker (Kafka's INVALID_REQUEST
    messages), or None."""
    if not name:
        return "Broker id must not be empty"
    try:
        asked = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    if asked != node_id:
        return f"Unexpected broker id, expected {node_id} but received {name}"
    return None


def _entry(name: str, value: str, source: int, config_type: int = 0, chain: list[dict] | None = None) -> dict:
    return {"name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False,
            "synonyms": chain or [], "config_type": config_type, "documentation": None}


def logger_configs(loggers: dict[str, str]) -> list[dict]:
    """Each logger and its level, as Kafka describes a broker-logger resource (documentation "",
    asked for or not)."""
    return [{**_entry(name, level, DYNAMIC_BROKER_LOGGER_CONFIG), "documentation": ""}
            for name, level in loggers.items()]


def client_metrics_entries(stored: dict[str, str]) -> list[dict]:
    """A subscription's three keys: its own value (source 7, one synonym) or the default (5)."""
    out = []
    for key, (kind, default) in sorted(client_metrics_configs.CLIENT_METRICS_CONFIGS.items()):
        if key in stored:
            chain = [{"name": key, "value": stored[key], "source": CLIENT_METRICS_CONFIG}]
            out.append(_entry(key, stored[key], CLIENT_METRICS_CONFIG, _CONFIG_TYPES[kind], chain))
        else:
            out.append(_entry(key, default, synonyms.DEFAULT_CONFIG, _CONFIG_TYPES[kind]))
    return out


def _group_configs(ctx, name: str) -> list[dict]:
    """Every (non-internal) group config of Kafka's: the group's own (GROUP_CONFIG), else its
    broker synonym's value from server.properties (STATIC_BROKER_CONFIG), else the default.
    As Kafka's createGroupConfigEntry, a key with no broker synonym has its own name as its
    DEFAULT_CONFIG synonym."""
    own = ctx.image.configs.get(("group", name), {})
    out = []
    for key, found in GROUP_CONFIGS.items():
        if found.internal:
            continue
        chain = []
        if key in own:
            chain.append({"name": key, "value": own[key], "source": GROUP_CONFIG})
        if found.synonym is not None:
            if found.synonym in ctx.config.raw:
                chain.append({"name": found.synonym, "value": ctx.config.raw[found.synonym],
                              "source": synonyms.STATIC_BROKER_CONFIG})
            chain.append({"name": found.synonym, "value": found.spec.default, "source": synonyms.DEFAULT_CONFIG})
        else:
            chain.append({"name": key, "value": found.spec.default, "source": synonyms.DEFAULT_CONFIG})
        out.append({"name": key, "value": group_config_value(key, own, ctx.config.raw), "read_only": False,
                    "config_source": chain[0]["source"] if chain else synonyms.DEFAULT_CONFIG,
                    "is_sensitive": False, "synonyms": chain,
                    "config_type": _CONFIG_TYPES.get(found.spec.kind, 0), "documentation": None})
    return out


async def handle(ctx: BrokerContext, header, request, conn=None) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        # Kafka 4.4 answers "" (not null) as the message of a resource described without error.
        result = {"error_code": 0, "error_message": "", "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        refusal = acl_checks.config_resource_error(ctx, conn, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                                   resource.resource_name)
        if refusal is not None:
            result.update(error_code=refusal[0], error_message=refusal[1])
        elif resource.resource_type == RESOURCE_TOPIC:
            if ctx.image.topic_by_name(resource.resource_name) is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"topic {resource.resource_name!r} does not exist")
            else:
                result["configs"] = _topic_configs(ctx, resource.resource_name)
        elif resource.resource_type == RESOURCE_BROKER:
            if resource.resource_name not in ("", str(ctx.config.node_id)):
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"broker {resource.resource_name!r} is not this broker "
                                            f"({ctx.config.node_id})")
            else:
                result["configs"] = _broker_configs(ctx, resource.resource_name)
        elif resource.resource_type == RESOURCE_BROKER_LOGGER:
            wrong = broker_id_error(resource.resource_name, ctx.config.node_id)
            if wrong:
                result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=wrong)
            else:
                result["configs"] = logger_configs(LEVELS.loggers())
        elif resource.resource_type == RESOURCE_CLIENT_METRICS:
            if not resource.resource_name:
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message="Client metrics subscription name must not be empty")
            else:
                result["configs"] = client_metrics_entries(
                    ctx.image.configs.get((CLIENT_METRICS, resource.resource_name), {}))
        elif resource.resource_type == RESOURCE_GROUP:
            if not resource.resource_name:
                result.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty")
            else:
                result["configs"] = _group_configs(ctx, resource.resource_name)
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"resource type {resource.resource_type}; expected 2 (topic), 4 (broker), "
                                        "8 (broker logger), 16 (client metrics) or 32 (group)")
        if resource.configuration_keys is not None and not result["error_code"]:
            wanted = set(resource.configuration_keys)
            result["configs"] = [c for c in result["configs"] if c["name"] in wanted]
        results.append(result)
    if getattr(request, "include_documentation", False):  # v3+
        for result in results:
            documented = _DOCUMENTED.get(result["resource_type"])
            for entry in result["configs"] if documented else ():
                entry["documentation"] = config_reference.documentation(documented, entry["name"])
    if not getattr(request, "include_synonyms", False):  # v0 has no synonyms; v1+ only when asked
        for result in results:
            for entry in result["configs"]:
                entry["synonyms"] = []
    if header.api_version == 0:  # v0 has is_default where later versions have config_source
        for result in results:
            for entry in result["configs"]:
                entry["is_default"] = entry["config_source"] == synonyms.DEFAULT_CONFIG
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
