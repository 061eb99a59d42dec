"""Effective per-topic configuration: broker defaults overlaid with the topic's own configs.

Topic configs live in the metadata image (`configs[("topic", name)]`), set at
CreateTopics time; the broker's `log.*` keys are the defaults, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raftka.log.config import LogConfig
from raftka.raft_meta.node_config import NodeConfig

# Topic-level keys that are not the log's business.
REPLICATION_KEYS = ("min.insync.replicas", "unclean.leader.election.enable")
# Kafka's reassignment throttle lists ("*", or "partition:broker,..."): accepted and validated
# for kafka-reassign-partitions' and Cruise Control's sake, but NOT enforced yet (README,
# "Moving partitions and retiring brokers"): a reassignment copies at full speed.
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


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """Raise ValueError naming the key for a topic config we cannot accept."""
    log_props = {k: v for k, v in configs.items() if k not in REPLICATION_KEYS and k not in THROTTLE_KEYS}
    LogConfig.from_properties(log_props)
    for key in THROTTLE_KEYS:
        if key in configs and not _throttle_list(configs[key]):
            raise ValueError(f"{key}: got {configs[key]!r}, expected * or a list of partition:broker "
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
    props.update({k: v for k, v in topic_configs.items() if k not in REPLICATION_KEYS and k not in THROTTLE_KEYS})
    min_isr = int(topic_configs.get("min.insync.replicas", config.min_insync_replicas))
    unclean_raw = topic_configs.get("unclean.leader.election.enable")
    unclean = (
        config.unclean_leader_election_enable if unclean_raw is None else unclean_raw.lower() == "true"
    )
    return TopicConfig(LogConfig.from_properties(props), min_isr, unclean)
