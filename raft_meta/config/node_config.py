"""`server.properties` parsing into a frozen `NodeConfig`.

Kafka's key names and defaults, so a Kafka user's file works as written. A
broker key that sets a topic key's default (`min.insync.replicas`,
`log.retention.hours`, ...) takes its own default from the topic config table
(`config_synonyms.synonym_default`), the one home of a topic key's type and default. The
broker imports `NodeConfig` from here (raft_meta sits below broker in the
layer DAG). Every problem raises `ConfigError` naming the key, the value
received and what was expected.

Derived ports (documented contract, see `NodeConfig.controller_rpc_address`):
the controller's internal RPC (broker heartbeats, AlterPartition, ...) listens
on the *controller quorum port + 1* of the same host, unless
`controller.rpc.port.offset` says another offset. The offset is a cluster-wide
rule (not a per-node port) so every broker can compute where the active
controller's RPC listens from `controller.quorum.voters` alone. A config whose
derived RPC port lands on another voter's quorum port or on one of the node's
listeners is refused at load (`storage format` and `server start` alike), naming
both ports and the setting.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftka.raft_meta.config import security_config
from raftka.raft_meta.config.config_synonyms import synonym_default
from raftka.raft_meta.security.acls import principal_error
from raftka.raft_meta.security.authorizer import STANDARD_AUTHORIZER, parse_super_users

SECRET_ENV = "RAFTKA_QUORUM_SECRET"
MIN_SECRET_BYTES = 16
HIDDEN = "[hidden]"  # what error messages show instead of a sensitive value, as Kafka does


def is_sensitive(key: str) -> bool:
    """Keys whose values are never printed (Kafka's rule: passwords and secrets)."""
    lowered = key.lower()
    return "secret" in lowered or "password" in lowered


def _shown(key: str, raw: str) -> str:
    return HIDDEN if is_sensitive(key) else repr(raw)


def check_secret(secret: str) -> str | None:
    """Why `secret` is too weak to be the cluster secret (without printing it), else None."""
    size = len(secret.encode("utf-8"))
    if size >= MIN_SECRET_BYTES:
        return None
    return (f"the quorum secret is {size} bytes long; expected at least {MIN_SECRET_BYTES}. "
            "Make one with `raftka storage random-uuid` (22 characters) or `openssl rand -base64 32`, "
            "the same on every node")


class ConfigError(ValueError):
    """A server.properties file or value that cannot be used."""


@dataclass(frozen=True)
class Endpoint:
    """One listener: `NAME://host:port` (an empty host means every interface)."""

    name: str
    host: str
    port: int

    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Voter:
    """One `controller.quorum.voters` entry: `id@host:port`."""

    node_id: int
    host: str
    port: int

    def address(self) -> str:
        return f"{self.host}:{self.port}"


# --- value parsers: each returns the parsed value or raises ValueError(expected) ---


def _int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError("an integer") from None


def _non_negative_int(raw: str) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError("an integer >= 0")
    return value


def _positive_int(raw: str) -> int:
    value = _int(raw)
    if value <= 0:
        raise ValueError("an integer > 0")
    return value


def _percentage(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= 100:
        raise ValueError("a percentage 0-100")
    return value


def _updates_per_snapshot(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= 500:
        raise ValueError("an integer 0-500")
    return value


def _replica_selector(raw: str) -> str:
    value = raw.strip()
    known = ("org.apache.kafka.common.replica.RackAwareReplicaSelector", "org.apache.kafka.common.replica.LeaderSelector")
    if value and value not in known:
        raise ValueError(f"empty or one of {', '.join(known)}")
    return "" if value == known[1] else value


def _metrics_port(raw: str) -> int:
    value = _int(raw)
    if not -1 <= value <= 65535:
        raise ValueError("a port 0-65535, or -1 for no metrics endpoint")
    return value


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("true or false")


def _str(raw: str) -> str:
    return raw.strip()


def _str_list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


# group.consumer.assignors: the KIP-848 server assignors (broker/group/consumer_assignors.py), by
# raftka's short names or Kafka's class names, as Kafka accepts both.
CONSUMER_ASSIGNORS = {"uniform": "uniform", "range": "range",
                      "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _consumer_assignors(raw: str) -> tuple[str, ...]:
    names = _str_list(raw)
    if not names or any(n not in CONSUMER_ASSIGNORS for n in names):
        raise ValueError("a comma-separated list of uniform, range (or their Kafka class names)")
    return tuple(dict.fromkeys(CONSUMER_ASSIGNORS[n] for n in names))


MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def _migration_policy(raw: str) -> str:
    value = raw.strip().lower()  # Kafka's ConsumerGroupMigrationPolicy.parse: case-insensitive
    if value not in MIGRATION_POLICIES:
        raise ValueError("one of disabled, upgrade, downgrade, bidirectional")
    return value


def _roles(raw: str) -> tuple[str, ...]:
    roles = _str_list(raw)
    if not roles or any(role not in ("broker", "controller") for role in roles):
        raise ValueError("a comma-separated subset of broker,controller")
    return tuple(sorted(set(roles)))


def _host_port(raw: str, what: str) -> tuple[str, int]:
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        raise ValueError(what)
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(what) from None
    if not 0 <= port <= 65535:
        raise ValueError(what)
    return host, port


def _listeners(raw: str) -> tuple[Endpoint, ...]:
    expected = "a comma-separated list of NAME://host:port"
    endpoints = []
    for item in _str_list(raw):
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ValueError(expected)
        host, port = _host_port(rest, expected)
        endpoints.append(Endpoint(name.upper(), host, port))
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError("listener names that are unique")
    return tuple(endpoints)


def _voters(raw: str) -> tuple[Voter, ...]:
    expected = "a comma-separated list of id@host:port"
    voters = []
    for item in _str_list(raw):
        id_text, sep, rest = item.partition("@")
        if not sep:
            raise ValueError(expected)
        try:
            node_id = int(id_text)
        except ValueError:
            raise ValueError(expected) from None
        host, port = _host_port(rest, expected)
        voters.append(Voter(node_id, host, port))
    if not voters:
        raise ValueError(expected)
    if len({v.node_id for v in voters}) != len(voters):
        raise ValueError("voter ids that are unique")
    return tuple(voters)


def _protocol_map(raw: str) -> tuple[tuple[str, str], ...]:
    return security_config.parse_protocol_map(raw)


def _ip_overrides(raw: str) -> tuple[tuple[str, int], ...]:
    """`max.connections.per.ip.overrides`: `host:count,host:count` (IPv6 as `[::1]:5` or `::1:5`)."""
    expected = "a comma-separated list of ip:count (IP addresses; host names are not resolved)"
    pairs: dict[str, int] = {}
    for item in _str_list(raw):
        host, sep, count_text = item.rpartition(":")
        host = host.strip().strip("[]")
        try:
            address = ipaddress.ip_address(host)
            count = int(count_text)
        except ValueError:
            raise ValueError(expected) from None
        if not sep or count < 0:
            raise ValueError(expected)
        mapped = getattr(address, "ipv4_mapped", None)
        pairs[str(mapped or address)] = count
    return tuple(pairs.items())


def _queued_bytes(raw: str) -> int:
    value = _int(raw)
    if value == 0 or value < -1:
        raise ValueError("a number of bytes > 0, or -1 for no limit")
    return value


def _cleanup_policy(raw: str) -> tuple[str, ...]:
    policies = _str_list(raw)
    if not policies or any(p not in ("delete", "compact") for p in policies):
        raise ValueError("delete, compact or delete,compact")
    return policies


# key -> (NodeConfig attribute, parser, default as written in a file or None for none)
def _authorizer_class(raw: str) -> str:
    raw = raw.strip()
    if raw not in ("", STANDARD_AUTHORIZER):
        raise ValueError(f"{raw!r} is not a supported authorizer; expected {STANDARD_AUTHORIZER} or empty")
    return raw


def _super_users(raw: str) -> frozenset[str]:
    users = parse_super_users(raw)
    for user in users:
        if principal_error(user) is not None:
            raise ValueError(f"super user {user!r} is not of the form Type:name (e.g. User:admin); "
                             "entries are separated by ';'")
    return users


_KEYS: dict[str, tuple[str, Callable[[str], Any], str | None]] = {
    "node.id": ("node_id", _non_negative_int, None),
    "broker.id": ("node_id", _non_negative_int, None),  # Kafka's older name, same meaning
    "process.roles": ("process_roles", _roles, "broker,controller"),
    "listeners": ("listeners", _listeners, None),
    "advertised.listeners": ("advertised_listeners", _listeners, None),
    "listener.security.protocol.map": ("listener_security_protocol_map", _protocol_map, None),
    "inter.broker.listener.name": ("inter_broker_listener_name", _str, None),
    "controller.listener.names": ("controller_listener_names", _str_list, "CONTROLLER"),
    "controller.quorum.voters": ("controller_quorum_voters", _voters, None),
    "controller.quorum.secret": ("controller_quorum_secret", _str, None),
    "controller.rpc.port.offset": ("controller_rpc_port_offset", _int, "1"),
    "log.dirs": ("log_dirs", _str_list, None),
    "log.dir": ("log_dirs", _str_list, None),
    "metadata.log.dir": ("metadata_log_dir", _str, None),
    "metadata.log.max.record.bytes.between.snapshots": (
        "metadata_log_max_record_bytes_between_snapshots", _positive_int, "20971520"),
    "num.partitions": ("num_partitions", _positive_int, "1"),
    "default.replication.factor": ("default_replication_factor", _positive_int, "1"),
    "auto.create.topics.enable": ("auto_create_topics_enable", _bool, "true"),
    "min.insync.replicas": ("min_insync_replicas", _positive_int, synonym_default("min.insync.replicas")),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _positive_int, "9000"),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _positive_int, "2000"),
    # raftka's own: the controller fences a broker at once when a TCP probe of its advertised
    # listeners is refused (its process is gone); see raft_meta/quorum/liveness_probe.py.
    "broker.liveness.probe.enable": ("broker_liveness_probe_enable", _bool, "true"),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _positive_int, "30000"),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool, synonym_default("unclean.leader.election.enable")),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", _bool, "true"),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", _positive_int, "300"),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", _positive_int, "3"),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _positive_int, "50"),
    # Committed offsets and empty groups expire (broker/group/offset_expiration.py): Kafka's
    # names, defaults (7 days; every 10 minutes) and ranges (at least 1).
    "offsets.retention.minutes": ("offsets_retention_minutes", _positive_int, "10080"),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", _positive_int, "600000"),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", _positive_int, "3"),
    "socket.request.max.bytes": ("socket_request_max_bytes", _positive_int, "104857600"),
    # Kafka listener limits (broker/net/network.py). Kafka's names and defaults, except
    # queued.max.request.bytes: Kafka's default is -1 (no limit), raftka's 100 MiB.
    "connections.max.idle.ms": ("connections_max_idle_ms", _positive_int, "600000"),
    "max.connections": ("max_connections", _non_negative_int, "2147483647"),
    "max.connections.per.ip": ("max_connections_per_ip", _non_negative_int, "2147483647"),
    "max.connections.per.ip.overrides": ("max_connections_per_ip_overrides", _ip_overrides, ""),
    "queued.max.request.bytes": ("queued_max_request_bytes", _queued_bytes, "104857600"),
    "log.segment.bytes": ("log_segment_bytes", _positive_int, synonym_default("log.segment.bytes")),
    "log.retention.ms": ("log_retention_ms", _int, None),
    "log.retention.minutes": ("log_retention_minutes", _int, None),
    "log.retention.hours": ("log_retention_hours", _int, synonym_default("log.retention.hours")),
    "log.retention.bytes": ("log_retention_bytes", _int, synonym_default("log.retention.bytes")),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", _positive_int, "300000"),
    "log.roll.ms": ("log_roll_ms", _positive_int, None),
    "log.roll.hours": ("log_roll_hours", _positive_int, synonym_default("log.roll.hours")),
    "log.index.interval.bytes": ("log_index_interval_bytes", _non_negative_int, synonym_default("log.index.interval.bytes")),
    "log.index.size.max.bytes": ("log_index_size_max_bytes", _positive_int, synonym_default("log.index.size.max.bytes")),
    "message.max.bytes": ("message_max_bytes", _positive_int, synonym_default("message.max.bytes")),
    "log.flush.interval.messages": ("log_flush_interval_messages", _positive_int, synonym_default("log.flush.interval.messages")),
    "log.flush.interval.ms": ("log_flush_interval_ms", _positive_int, None),
    "log.cleanup.policy": ("log_cleanup_policy", _cleanup_policy, synonym_default("log.cleanup.policy")),
    "log.cleaner.enable": ("log_cleaner_enable", _bool, "true"),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _non_negative_int, "3000"),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _positive_int, "6000"),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _positive_int, "1800000"),
    # KIP-848 consumer groups (broker/group/consumer_group_state.py), Kafka 4.4's defaults.
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", _positive_int, "45000"),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", _positive_int, "5000"),
    "group.consumer.assignors": ("group_consumer_assignors", _consumer_assignors, "uniform,range"),
    "group.consumer.regex.refresh.interval.ms": ("group_consumer_regex_refresh_interval_ms", _positive_int,
                                                 "600000"),
    "group.consumer.migration.policy": ("group_consumer_migration_policy", _migration_policy, "bidirectional"),
    # KIP-932 share groups (broker/group/share_group_coordinator.py), Kafka 4.4's defaults and bounds.
    "group.share.session.timeout.ms": ("group_share_session_timeout_ms", _positive_int, "45000"),
    "group.share.min.session.timeout.ms": ("group_share_min_session_timeout_ms", _positive_int, "45000"),
    "group.share.max.session.timeout.ms": ("group_share_max_session_timeout_ms", _positive_int, "60000"),
    "group.share.heartbeat.interval.ms": ("group_share_heartbeat_interval_ms", _positive_int, "5000"),
    "group.share.min.heartbeat.interval.ms": ("group_share_min_heartbeat_interval_ms", _positive_int, "5000"),
    "group.share.max.heartbeat.interval.ms": ("group_share_max_heartbeat_interval_ms", _positive_int, "15000"),
    "group.share.max.size": ("group_share_max_size", _positive_int, "200"),
    # Share groups on the partition leader (broker/group/share_partition_manager.py), Kafka 4.4's
    # defaults: the groups' defaults of share.record.lock.duration.ms, share.delivery.count.limit
    # and share.partition.max.record.locks, the bounds a group's own value must keep, and the
    # share sessions one broker holds.
    "group.share.record.lock.duration.ms": ("group_share_record_lock_duration_ms", _positive_int, "30000"),
    "group.share.min.record.lock.duration.ms": ("group_share_min_record_lock_duration_ms", _positive_int, "15000"),
    "group.share.max.record.lock.duration.ms": ("group_share_max_record_lock_duration_ms", _positive_int, "60000"),
    "group.share.delivery.count.limit": ("group_share_delivery_count_limit", _positive_int, "5"),
    "group.share.min.delivery.count.limit": ("group_share_min_delivery_count_limit", _positive_int, "2"),
    "group.share.max.delivery.count.limit": ("group_share_max_delivery_count_limit", _positive_int, "10"),
    "group.share.partition.max.record.locks": ("group_share_partition_max_record_locks", _positive_int, "2000"),
    "group.share.min.partition.max.record.locks": ("group_share_min_partition_max_record_locks", _positive_int,
                                                   "100"),
    "group.share.max.partition.max.record.locks": ("group_share_max_partition_max_record_locks", _positive_int,
                                                   "4000"),
    "group.share.max.share.sessions": ("group_share_max_share_sessions", _positive_int, "2000"),
    "broker.rack": ("rack", _str, None),
    "rack": ("rack", _str, None),
    "num.network.threads": ("num_network_threads", _positive_int, "3"),  # accepted for Kafka files; trio ignores it
    "num.io.threads": ("num_io_threads", _positive_int, "8"),  # accepted for Kafka files; trio ignores it
    # raftka's own: the Prometheus endpoint (broker/metrics_http.py; docs/metrics.md). -1: off,
    # 0: any free port (logged as metrics.listening). The host defaults to the first listener's.
    "metrics.port": ("metrics_port", _metrics_port, "-1"),
    "metrics.host": ("metrics_host", _str, None),
    # ACLs (raft_meta/security/authorizer.py): empty authorizer.class.name = no checks, as in Kafka.
    "authorizer.class.name": ("authorizer_class_name", _authorizer_class, ""),
    "super.users": ("super_users", _super_users, ""),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", _bool, "false"),
    # fsync the metadata journal (in batches) before a voter acknowledges entries (raft_meta/quorum/pysyncobj_patches.py)
    "metadata.log.fsync.enable": ("metadata_log_fsync_enable", _bool, "true"),
    # Kafka's threshold for automatic preferred-leader balancing (raft_meta/controller/leader_balance_decisions.py).
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", _percentage, "10"),
    # KIP-392 (broker/replication/replica_selector.py): empty = consumers read from leaders.
    "replica.selector.class": ("replica_selector_class", _replica_selector, ""),
    # Replication throttles (KIP-73; broker/replication/replication_quota.py): the static defaults of the
    # dynamic broker keys (AlterConfigs on a broker or the cluster default wins), bytes/s, and
    # the quota meter's windows.
    "leader.replication.throttled.rate": ("leader_replication_throttled_rate", _non_negative_int,
                                          "9223372036854775807"),
    "follower.replication.throttled.rate": ("follower_replication_throttled_rate", _non_negative_int,
                                            "9223372036854775807"),
    "replication.quota.window.num": ("replication_quota_window_num", _positive_int, "11"),
    "replication.quota.window.size.seconds": ("replication_quota_window_size_seconds", _positive_int, "1"),
    # Client quotas' meter (KIP-13; broker/client_quotas.py): samples and their length.
    "quota.window.num": ("quota_window_num", _positive_int, "11"),
    "quota.window.size.seconds": ("quota_window_size_seconds", _positive_int, "1"),
    # controller_mutation_rate's token bucket (KIP-599): it holds num * size seconds of the rate.
    "controller.quota.window.num": ("controller_quota_window_num", _positive_int, "11"),
    "controller.quota.window.size.seconds": ("controller_quota_window_size_seconds", _positive_int, "1"),
    # The transaction coordinator (broker/txn/txn_coordinator.py): Kafka's names and defaults.
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", _positive_int, "50"),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", _positive_int, "2"),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", _positive_int, "104857600"),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _positive_int, "900000"),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", _positive_int, "604800000"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", _positive_int, "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "transaction_remove_expired_transaction_cleanup_interval_ms", _positive_int, "3600000"),
    # Transactions, partition side (KIP-890 part 1): a partition leader asks the transaction
    # coordinator before a producer's first transactional batch there.
    "transaction.partition.verification.enable": ("transaction_partition_verification_enable", _bool, "true"),
    # The share coordinator (broker/group/share_coordinator.py) and `__share_group_state`: Kafka's
    # names and defaults (the replication factor is capped by the live brokers, as for the others).
    "share.coordinator.state.topic.num.partitions": ("share_coordinator_state_topic_num_partitions", _positive_int,
                                                     "50"),
    "share.coordinator.state.topic.replication.factor": ("share_coordinator_state_topic_replication_factor",
                                                         _positive_int, "3"),
    "share.coordinator.state.topic.min.isr": ("share_coordinator_state_topic_min_isr", _positive_int, "2"),
    "share.coordinator.state.topic.segment.bytes": ("share_coordinator_state_topic_segment_bytes", _positive_int,
                                                    "104857600"),
    "share.coordinator.snapshot.update.records.per.snapshot": (
        "share_coordinator_snapshot_update_records_per_snapshot", _updates_per_snapshot, "500"),
    "share.coordinator.write.timeout.ms": ("share_coordinator_write_timeout_ms", _positive_int, "5000"),
}


# Keys of Kafka's stock server.properties that have no meaning here (threads and
# socket buffers are trio's business). They are checked to be integers, kept in
# `NodeConfig.raw` and otherwise ignored, so a Kafka user's file still loads.
_ACCEPTED_IGNORED = {
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
}


@dataclass(frozen=True)
class NodeConfig:
    """One node's configuration. Build it with `parse_node_config` or `load_node_config`."""

    node_id: int
    process_roles: tuple[str, ...]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    listener_security_protocol_map: tuple[tuple[str, str], ...]
    inter_broker_listener_name: str
    controller_listener_names: tuple[str, ...]
    controller_quorum_voters: tuple[Voter, ...]
    controller_quorum_secret: str | None = field(repr=False)
    controller_rpc_port_offset: int
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    metadata_log_max_record_bytes_between_snapshots: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    min_insync_replicas: int
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    broker_liveness_probe_enable: bool
    replica_lag_time_max_ms: int
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    offsets_topic_replication_factor: int
    offsets_topic_num_partitions: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    transaction_state_log_replication_factor: int
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...]  # (ip, limit)
    queued_max_request_bytes: int  # -1 = no limit
    log_segment_bytes: int
    log_retention_ms: int  # resolved from .ms > .minutes > .hours as Kafka does; -1 = forever
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_roll_ms: int  # resolved from .ms > .hours
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    message_max_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_cleanup_policy: tuple[str, ...]
    log_cleaner_enable: bool
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_consumer_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_assignors: tuple[str, ...]
    rack: str | None
    num_network_threads: int
    num_io_threads: int
    metrics_port: int = -1
    group_consumer_migration_policy: str = "bidirectional"
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_heartbeat_interval_ms: int = 5000
    group_consumer_regex_refresh_interval_ms: int = 600000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_max_size: int = 200
    metrics_host: str | None = None
    authorizer_class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    metadata_log_fsync_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    replica_selector_class: str = ""
    leader_replication_throttled_rate: int = 2**63 - 1
    follower_replication_throttled_rate: int = 2**63 - 1
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    controller_quota_window_num: int = 11
    controller_quota_window_size_seconds: int = 1
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104857600
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    transaction_partition_verification_enable: bool = True
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    share_coordinator_state_topic_segment_bytes: int = 104857600
    share_coordinator_snapshot_update_records_per_snapshot: int = 500
    share_coordinator_write_timeout_ms: int = 5000
    group_share_record_lock_duration_ms: int = 30000
    group_share_min_record_lock_duration_ms: int = 15000
    group_share_max_record_lock_duration_ms: int = 60000
    group_share_delivery_count_limit: int = 5
    group_share_min_delivery_count_limit: int = 2
    group_share_max_delivery_count_limit: int = 10
    group_share_partition_max_record_locks: int = 2000
    group_share_min_partition_max_record_locks: int = 100
    group_share_max_partition_max_record_locks: int = 4000
    group_share_max_share_sessions: int = 2000
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    # Listeners' protocols, TLS and SASL (raft_meta/config/security_config.py owns those keys).
    security: security_config.SecuritySettings = field(
        default_factory=security_config.SecuritySettings, compare=False, repr=False)

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    def voter(self, node_id: int) -> Voter:
        for voter in self.controller_quorum_voters:
            if voter.node_id == node_id:
                return voter
        raise KeyError(f"node id {node_id} is not in controller.quorum.voters")

    def controller_listener(self) -> Endpoint | None:
        """The listener the quorum (pysyncobj) binds, if this node is a controller."""
        for endpoint in self.listeners:
            if endpoint.name in self.controller_listener_names:
                return endpoint
        return None

    def quorum_bind_address(self) -> str:
        """host:port pysyncobj binds: the CONTROLLER listener (its host, or the voter's host)."""
        endpoint = self.controller_listener()
        voter = self.voter(self.node_id)
        if endpoint is None:
            return voter.address()
        return f"{endpoint.host or voter.host}:{endpoint.port}"

    def controller_rpc_address(self, node_id: int) -> tuple[str, int]:
        """Where voter `node_id`'s controller RPC listens: its quorum host, quorum port + offset."""
        voter = self.voter(node_id)
        return voter.host, voter.port + self.controller_rpc_port_offset

    def controller_rpc_bind_address(self) -> tuple[str, int]:
        """Where THIS node's controller RPC binds: the CONTROLLER listener's host (else the
        voter's host), at the voter port + offset. Peers dial `controller_rpc_address(id)`;
        the two differ only when the voter addresses point at a proxy (the chaos harness)."""
        endpoint = self.controller_listener()
        host, port = self.controller_rpc_address(self.node_id)
        return (endpoint.host or host) if endpoint is not None else host, port

    def broker_listeners(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.listeners if e.name not in self.controller_listener_names)

    def advertised(self) -> tuple[Endpoint, ...]:
        """Advertised broker endpoints (advertised.listeners, else the broker listeners)."""
        return self.advertised_listeners or self.broker_listeners()


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties style: `key=value` or `key: value`, `#`/`!` comments, `\\` continuations."""
    result: dict[str, str] = {}
    pending = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        logical = pending + stripped
        pending = ""
        positions = [i for i in (logical.find("="), logical.find(":")) if i >= 0]
        if not positions:
            # Only the first word is shown: the rest may be a value, and values may be secrets.
            first, _, rest = logical.partition(" ")
            raise ConfigError(f"line {number}: {first + (' ' + HIDDEN if rest.strip() else '')!r}: expected key=value")
        cut = min(positions)
        key, value = logical[:cut].strip(), logical[cut + 1 :].strip()
        if not key:
            raise ConfigError(f"line {number}: expected a key before '=' (the value is hidden)")
        result[key] = value
    if pending:
        result_key = pending.split("=", 1)[0].strip()
        raise ConfigError(f"key {result_key!r}: file ends inside a '\\' continuation line")
    return result


def parse_node_config(properties: Mapping[str, str], env: Mapping[str, str] | None = None) -> NodeConfig:
    """Validate `properties` (already split into key/value) into a `NodeConfig`."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for key, raw in properties.items():
        if key in _ACCEPTED_IGNORED:
            try:
                _int(raw)
            except ValueError as exc:
                raise ConfigError(f"config key {key!r}: got {_shown(key, raw)}, expected {exc}") from None
            continue
        spec = _KEYS.get(key)
        if spec is None and security_config.is_security_key(key):
            continue  # validated below, with the listeners known (raft_meta/config/security_config.py)
        if spec is None:
            from raftka.raft_meta.config.config_reference import nearest_key

            near = nearest_key(key)
            raise ConfigError(f"unknown config key {key!r} (value {_shown(key, raw)}); "
                              + (f"did you mean {near!r}? " if near else "")
                              + "every key is listed in docs/configuration.md")
        attribute, parser, _ = spec
        try:
            values[attribute] = parser(raw)
        except ValueError as exc:
            raise ConfigError(f"config key {key!r}: got {_shown(key, raw)}, expected {exc}") from None
    for attribute, parser, default in _KEYS.values():
        if attribute not in values and default is not None:
            values[attribute] = parser(default)

    for required in ("node.id", "listeners", "controller.quorum.voters", "log.dirs"):
        if _KEYS[required][0] not in values:
            raise ConfigError(f"config key {required!r} is missing; it is required")

    if values.get("controller_quorum_secret") is None and env.get(SECRET_ENV):
        values["controller_quorum_secret"] = env[SECRET_ENV]
    values.setdefault("controller_quorum_secret", None)
    values.setdefault("advertised_listeners", ())
    values.setdefault("rack", None)
    values.setdefault("log_flush_interval_ms", None)
    values.setdefault("metadata_log_dir", values["log_dirs"][0] if values["log_dirs"] else "")
    if not values["log_dirs"]:
        raise ConfigError("config key 'log.dirs': got '', expected at least one directory")

    # Kafka's precedence: .ms beats .minutes beats .hours.
    if values.get("log_retention_ms") is not None:
        retention = values["log_retention_ms"]
    elif values.get("log_retention_minutes") is not None:
        retention = values["log_retention_minutes"] * 60_000
    else:
        retention = values["log_retention_hours"] * 3_600_000
    values["log_retention_ms"] = -1 if retention < 0 else retention
    values.pop("log_retention_minutes", None)
    values.pop("log_retention_hours", None)
    values["log_roll_ms"] = values.get("log_roll_ms") or values["log_roll_hours"] * 3_600_000
    values.pop("log_roll_hours", None)

    listener_names = {e.name for e in values["listeners"]}
    protocol_map = values.get("listener_security_protocol_map") or tuple(
        (name, security_config.default_protocol(name)) for name in sorted(listener_names)
    )
    values["listener_security_protocol_map"] = protocol_map
    unmapped = listener_names - {name for name, _ in protocol_map}
    if unmapped:
        raise ConfigError(
            f"config key 'listener.security.protocol.map': listeners {sorted(unmapped)} have no entry; "
            "expected NAME:PROTOCOL for every listener"
        )

    controller_names = values["controller_listener_names"]
    broker_names = [e.name for e in values["listeners"] if e.name not in controller_names]
    if "inter_broker_listener_name" not in values:
        values["inter_broker_listener_name"] = broker_names[0] if broker_names else ""
    values["inter_broker_listener_name"] = values["inter_broker_listener_name"].upper()

    for name, protocol in protocol_map:
        if name in controller_names and protocol != "PLAINTEXT":
            raise ConfigError(
                f"config key 'listener.security.protocol.map': controller listener {name} maps to {protocol}; "
                "expected PLAINTEXT (the quorum port speaks pysyncobj's protocol, encrypted with "
                "controller.quorum.secret, not TLS or SASL)")
    try:
        values["security"] = security_config.parse_security(
            properties, dict(protocol_map),
            tuple(e.name for e in values["listeners"] if e.name not in controller_names),
            values["inter_broker_listener_name"])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config = NodeConfig(**values, raw=dict(properties))
    _check_consistency(config)
    return config


def _check_consistency(config: NodeConfig) -> None:
    # Every node needs it: controllers for the quorum, brokers for the controller RPC.
    if not config.controller_quorum_secret:
        raise ConfigError(
            f"config key 'controller.quorum.secret' is missing (and {SECRET_ENV} is unset); expected a shared "
            "secret of at least 16 bytes, the same on every node (`raftka storage random-uuid` or "
            "`openssl rand -base64 32`): without it anyone reaching the quorum port can run code"
        )
    problem = check_secret(config.controller_quorum_secret)
    if problem is not None:
        raise ConfigError(f"config key 'controller.quorum.secret' (or {SECRET_ENV}): {problem}")
    voter_ids = [v.node_id for v in config.controller_quorum_voters]
    if config.is_controller:
        if config.node_id not in voter_ids:
            raise ConfigError(
                f"config key 'controller.quorum.voters': node.id {config.node_id} is not among voters {voter_ids}; "
                "expected a controller's own id in the voter list"
            )
        endpoint = config.controller_listener()
        if endpoint is None:
            raise ConfigError(
                f"config key 'listeners': no listener named {list(config.controller_listener_names)} "
                f"(from controller.listener.names) in {[e.name for e in config.listeners]}; "
                "expected a controller to have its CONTROLLER listener"
            )
        voter = config.voter(config.node_id)
        if endpoint.port != voter.port:
            raise ConfigError(
                f"config key 'listeners': {endpoint.name} port {endpoint.port} differs from this node's "
                f"controller.quorum.voters port {voter.port}; expected the same port"
            )
    else:
        # A broker-only node follows the quorum as an observer (raft_meta/quorum/quorum.py), as in KRaft.
        if config.node_id in voter_ids:
            raise ConfigError(
                f"config key 'node.id': {config.node_id} is among controller.quorum.voters {voter_ids} but "
                f"process.roles is {','.join(config.process_roles)!r}; expected a broker-only node to have "
                "an id of its own (a voter's id belongs to a controller)")
        if config.controller_listener() is not None:
            raise ConfigError(
                f"config key 'listeners': got controller listener {config.controller_listener().name!r} on a "
                "node without the controller role; expected controller.listener.names not to appear in "
                "listeners (Kafka's rule for broker-only nodes)")
    _check_rpc_ports(config)
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        raise ConfigError(
            f"config key 'group.consumer.heartbeat.interval.ms': got {config.group_consumer_heartbeat_interval_ms}, "
            f"expected less than group.consumer.session.timeout.ms ({config.group_consumer_session_timeout_ms})")
    _check_share_group_bounds(config)
    if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides:
        raise ConfigError(
            "config key 'max.connections.per.ip': got 0 without max.connections.per.ip.overrides; "
            "expected a limit > 0, or overrides naming the addresses allowed to connect"
        )
    if config.is_broker:
        names = {e.name for e in config.broker_listeners()}
        if not names:
            raise ConfigError(
                f"config key 'listeners': got only controller listeners {[e.name for e in config.listeners]}; "
                "expected a broker to have at least one client listener"
            )
        if config.inter_broker_listener_name not in names:
            raise ConfigError(
                f"config key 'inter.broker.listener.name': got {config.inter_broker_listener_name!r}, "
                f"expected one of {sorted(names)}"
            )
        for endpoint in config.advertised_listeners:
            if endpoint.name in config.controller_listener_names:
                raise ConfigError(
                    f"config key 'advertised.listeners': got controller listener {endpoint.name!r}; "
                    "expected only broker listeners"
                )


def _check_rpc_ports(config: NodeConfig) -> None:
    """The controller RPC's derived port (quorum port + controller.rpc.port.offset) must not be
    another voter's quorum port, nor one of this node's listeners: voters on consecutive ports
    of one host (9093, 9094, 9095) would otherwise fail at bind time with a baffling error."""
    offset = config.controller_rpc_port_offset
    taken: dict[tuple[str, int], str] = {}
    for voter in config.controller_quorum_voters:
        taken[(voter.host, voter.port)] = f"voter {voter.node_id}'s quorum port {voter.host}:{voter.port}"
    for endpoint in config.listeners:
        if endpoint.name not in config.controller_listener_names:
            for host in {endpoint.host, *(v.host for v in config.controller_quorum_voters if not endpoint.host)}:
                taken.setdefault((host, endpoint.port), f"this node's {endpoint.name} listener port {endpoint.port}")
    for voter in config.controller_quorum_voters:
        rpc = (voter.host, voter.port + offset)
        if rpc in taken:
            raise ConfigError(
                f"config key 'controller.rpc.port.offset': voter {voter.node_id}'s controller RPC port "
                f"{voter.host}:{voter.port + offset} (its quorum port {voter.port} + offset {offset}) is also "
                f"{taken[rpc]}; expected quorum ports at least {offset + 1} apart on one host "
                f"(e.g. 9093, 9193, 9293) or another controller.rpc.port.offset"
            )


def load_node_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> NodeConfig:
    """Read and validate a server.properties file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    return parse_node_config(parse_properties(text), env=env)


# Every server.properties key raftka knows: AlterConfigs refuses to change one of them that is
# not dynamic (raft_meta/controller/config_decisions.py) with INVALID_REQUEST rather than "unknown key".
STATIC_BROKER_KEYS = frozenset(_KEYS) | frozenset(_ACCEPTED_IGNORED)


def _check_share_group_bounds(config: NodeConfig) -> None:
    """Kafka's GroupCoordinatorConfig rules for group.share.*: each default within its
    min/max, and the heartbeat interval below the session timeout."""
    for what in ("session.timeout.ms", "heartbeat.interval.ms"):
        attr = "group_share_" + what.replace(".", "_")
        low = getattr(config, "group_share_min_" + what.replace(".", "_"))
        high = getattr(config, "group_share_max_" + what.replace(".", "_"))
        value = getattr(config, attr)
        if not low <= value <= high:
            raise ConfigError(f"config key 'group.share.{what}': got {value}, expected between "
                              f"group.share.min.{what} ({low}) and group.share.max.{what} ({high})")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError(
            f"config key 'group.share.heartbeat.interval.ms': got {config.group_share_heartbeat_interval_ms}, "
            f"expected less than group.share.session.timeout.ms ({config.group_share_session_timeout_ms})")
