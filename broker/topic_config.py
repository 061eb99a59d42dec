"""Effective per-topic configuration: broker defaults overlaid with the topic's own configs.

Topic configs live in the metadata image (`configs[("topic", name)]`), set at
CreateTopics time; the broker's `log.*` keys are the defaults, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raftka.log.config import LOG_KEYS as _LOG_KEYS
from raftka.log.config import LogConfig
from raftka.raft_meta.config import topic_configs
from raftka.raft_meta.config.config_synonyms import TOPIC_SYNONYMS, topic_key_of
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.controller.config_decisions import DYNAMIC_BROKER_CONFIGS
from raftka.raft_meta.metadata.image import MetadataImage

# Topic-level keys that are not the log's business.
REPLICATION_KEYS = ("min.insync.replicas", "unclean.leader.election.enable")
# Kafka's reassignment throttle lists ("*", or "partition:broker,..."), enforced by the fetch
# path against the brokers' *.replication.throttled.rate (broker/replication/replication_quota.py).
THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@dataclass(frozen=True, slots=True)
class TopicConfig:
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
    """The keys the partition log acts on (the others are stored only: raft_meta/config/topic_configs.py)."""
    return {k: v for k, v in configs.items() if k in _LOG_KEYS}


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """The configs as stored (normalised); ValueError naming the key for one Kafka would refuse
    (any key of Kafka 4's topic configs is accepted: raft_meta/config/topic_configs.py)."""
    normalized = topic_configs.validate(configs)
    LogConfig.from_properties(_log_props(normalized))
    for key in THROTTLE_KEYS:
        if key in normalized and not _throttle_list(normalized[key]):
            raise ValueError(f"{key}: got {normalized[key]!r}, expected * or a list of partition:broker "
                             "pairs like 0:101,0:102")
    if "min.insync.replicas" in configs:
        try:
            value = int(configs["min.insync.replicas"])
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"min.insync.replicas: got {configs['min.insync.replicas']!r}, expected an integer >= 1"
            )
    if "unclean.leader.election.enable" in configs:
        if configs["unclean.leader.election.enable"].lower() not in ("true", "false"):
            raise ValueError(
                "unclean.leader.election.enable: got "
                f"{configs['unclean.leader.election.enable']!r}, expected true or false"
            )
    return normalized


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


def _throttle_list(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: "*", empty, or partition:broker pairs."""
    value = value.strip()
    if value in ("", "*"):
        return True
    for item in value.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            return False
    return True


def effective_topic_config(config: NodeConfig, topic_configs: Mapping[str, str]) -> TopicConfig:
    props = broker_log_defaults(config)
    props.update(_log_props(topic_configs))
    min_isr = int(topic_configs.get("min.insync.replicas", config.min_insync_replicas))
    unclean_raw = topic_configs.get("unclean.leader.election.enable")
    unclean = (
        config.unclean_leader_election_enable if unclean_raw is None else unclean_raw.lower() == "true"
    )
    return TopicConfig(LogConfig.from_properties(props), min_isr, unclean)
