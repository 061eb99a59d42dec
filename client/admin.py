"""AsyncAdmin: topics and cluster description.

Error policy: every call raises on the first per-topic error, as a typed
KafkaError (TopicAlreadyExistsError, UnknownTopicOrPartitionError, ...)
whose message names the topic. Calls for several topics apply to all of them
on the broker even when one fails; pass one topic per call to tell them apart.

Topic creation/deletion/partition changes go to the controller (NOT_CONTROLLER
refreshes metadata and retries once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import trio

from raftka.client import share_group_admin
from raftka.client.bootstrap import parse_bootstrap
from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError, NotControllerError, error_for_code
from raftka.client.lifecycle import OwnedNursery
from raftka.client.metadata import BrokerInfo, PartitionInfo
from raftka.client.protocol import (
    ApiKey,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    Message,
)
from raftka.client.protocol.messages import request_class
from raftka.client.records import TopicPartition
from raftka.client.security import ClientSecurity

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # a group's dynamic configs (share.auto.offset.reset, ...)


# A client quota entity: {"user": name, "client-id": name} (or {"ip": address}); a None name
# is that type's default entity (kafka-configs' `<default>`).
QuotaEntity = Mapping[str, "str | None"]
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2  # DescribeClientQuotas' match types


@dataclass(frozen=True)
class QuotaFilter:
    """One component of a DescribeClientQuotas filter: the `entity_type`'s entity named
    `match` (exact), its default entity (`default=True`), or any named one (`match` None)."""

    entity_type: str
    match: str | None = None
    default: bool = False

    def to_wire(self) -> dict:
        kind = MATCH_DEFAULT if self.default else MATCH_ANY if self.match is None else MATCH_EXACT
        return {"entity_type": self.entity_type, "match_type": kind, "match": self.match}


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False


@dataclass(frozen=True)
class ClusterDescription:
    brokers: tuple[BrokerInfo, ...]
    controller_id: int
    cluster_id: str | None


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    is_sensitive: bool
    # Kafka's ConfigSource: 1 DYNAMIC_TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG,
    # 3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG,
    # 8 GROUP_CONFIG (-1: unknown)
    source: int = -1

    @property
    def is_dynamic(self) -> bool:
        return self.source in (1, 2, 3, 8)


class AsyncAdmin:
    def __init__(self, bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092", *,
                 client_id: str = "raftka-admin", request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, security: ClientSecurity | None = None,
                 default_api_timeout_ms: int = 60000) -> None:
        parse_bootstrap(bootstrap_servers)  # a bad address is a ValueError here, not in start()
        if default_api_timeout_ms < 0:
            raise ValueError(f"default_api_timeout_ms must be >= 0, got {default_api_timeout_ms}")
        self._bootstrap = bootstrap_servers
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self._owner = OwnedNursery()
        self._cluster: Cluster | None = None

    async def start(self) -> None:
        """Open the client. A cluster that is down is not an error here (as for Kafka's Admin):
        each call waits for a broker to answer, up to `default_api_timeout_ms`."""
        if self._owner.open:
            return
        nursery = await self._owner.enter()
        self._cluster = Cluster(self._bootstrap, nursery, client_id=self.client_id,
                                request_timeout_ms=self.request_timeout_ms,
                                retry_backoff_ms=self.retry_backoff_ms, security=self.security,
                                reachable_wait_ms=self.default_api_timeout_ms)
        try:
            await self._cluster.bootstrap_if_reachable()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._cluster is not None:
            with trio.CancelScope(shield=True):  # completes even while the caller is cancelled
                await self._cluster.aclose()
            self._cluster = None
        await self._owner.exit()

    async def __aenter__(self) -> AsyncAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise KafkaError("the admin client is not started or already closed")
        return self._cluster

    async def _to_controller(self, api_key: ApiKey, request: Message) -> Message:
        for attempt in range(3):
            conn = await self.cluster.controller_connection()
            response = await conn.request(api_key, request)
            codes = [getattr(r, "error_code", 0) for r in _results(response)]
            if NotControllerError.code in codes and attempt < 2:
                await self.cluster.refresh_metadata(all_topics=True)
                await trio.sleep(self.retry_backoff_ms / 1000)
                continue
            return response
        raise AssertionError("unreachable")

    # --- topics ----------------------------------------------------------
    async def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int | None = None) -> None:
        topics = list(new_topics)
        request = CreateTopicsRequest(
            topics=[{
                "name": t.name, "num_partitions": t.num_partitions,
                "replication_factor": t.replication_factor, "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
            } for t in topics],
            timeout_ms=self.request_timeout_ms if timeout_ms is None else timeout_ms,
            validate_only=validate_only)
        response = await self._to_controller(ApiKey.CREATE_TOPICS, request)
        _raise_first(response.topics, "creating topic")

    async def delete_topics(self, topics: Iterable[str], *, timeout_ms: int | None = None
                            ) -> None:
        names = list(topics)
        request = DeleteTopicsRequest(  # v0-5 name topics in topic_names, v6 in topics
            topic_names=names, topics=[{"name": name} for name in names],
            timeout_ms=self.request_timeout_ms if timeout_ms is None else timeout_ms)
        response = await self._to_controller(ApiKey.DELETE_TOPICS, request)
        _raise_first(response.responses, "deleting topic")

    async def create_partitions(self, new_counts: Mapping[str, int], *,
                                validate_only: bool = False) -> None:
        """Grow each topic to the given total partition count."""
        request = CreatePartitionsRequest(
            topics=[{"name": t, "count": n, "assignments": None} for t, n in new_counts.items()],
            timeout_ms=self.request_timeout_ms, validate_only=validate_only)
        response = await self._to_controller(ApiKey.CREATE_PARTITIONS, request)
        _raise_first(response.results, "adding partitions to topic")

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        meta = await self.cluster.refresh_metadata(all_topics=True)
        return sorted(n for n, t in meta.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, topics: Iterable[str] | None = None
                              ) -> list[TopicDescription]:
        """Partitions (leader, replicas, ISR) of `topics`, or of every topic.
        Raises UnknownTopicOrPartitionError for a named topic that does not exist."""
        meta = await self.cluster.refresh_metadata(all_topics=True)
        names = sorted(meta.topics) if topics is None else list(topics)
        out: list[TopicDescription] = []
        for name in names:
            info = meta.topics.get(name)
            if info is None:
                code = meta.topic_errors.get(name, 3)
                raise error_for_code(code, f"topic {name!r} does not exist")
            parts = tuple(info.partitions[p] for p in sorted(info.partitions))
            out.append(TopicDescription(name, parts, info.is_internal))
        return out

    async def describe_cluster(self) -> ClusterDescription:
        meta = await self.cluster.refresh_metadata(all_topics=True)
        brokers = tuple(meta.brokers[b] for b in sorted(meta.brokers))
        return ClusterDescription(brokers, meta.controller_id, meta.cluster_id)

    async def describe_configs(self, topic: str | None = None, *, broker_id: int | None = None,
                               keys: Iterable[str] | None = None, broker_default: bool = False,
                               group: str | None = None) -> dict[str, ConfigEntry]:
        """The configs of one topic, one broker, (`broker_default`) the cluster-wide dynamic
        broker defaults, or one group (its dynamic group configs and the broker defaults they
        override), by name."""
        if sum((topic is not None, broker_id is not None, broker_default, group is not None)) != 1:
            raise ValueError("describe_configs needs exactly one of topic=, broker_id=, broker_default=True "
                             "or group=")
        resource_type = TOPIC_RESOURCE if topic is not None else GROUP_RESOURCE if group is not None \
            else BROKER_RESOURCE
        name = topic if topic is not None else group if group is not None else "" if broker_default \
            else str(broker_id)
        request = DescribeConfigsRequest(resources=[{
            "resource_type": resource_type, "resource_name": name,
            "configuration_keys": None if keys is None else list(keys)}])
        if broker_id is not None:
            response = await self.cluster.send_to(broker_id, ApiKey.DESCRIBE_CONFIGS, request)
        else:
            response = await self.cluster.send_any(ApiKey.DESCRIBE_CONFIGS, request)
        out: dict[str, ConfigEntry] = {}
        for result in response.results:
            if result.error_code:
                raise error_for_code(result.error_code, f"describing configs of {name!r}: "
                                     f"{result.error_message or ''}".rstrip(": "))
            for c in result.configs:
                # config_source 5 = DEFAULT_CONFIG (v1+)
                out[c.name] = ConfigEntry(c.name, c.value, c.read_only, c.config_source == 5,
                                          c.is_sensitive, c.config_source)
        return out

    async def alter_configs(self, topic: str | None = None, *, broker_id: int | None = None,
                            broker_default: bool = False, group: str | None = None,
                            set_configs: Mapping[str, str] | None = None,
                            delete: Iterable[str] = (), validate_only: bool = False) -> None:
        """Set and delete dynamic configs of one topic, one broker, (`broker_default`) the
        cluster-wide broker defaults or one group (e.g. a share group's `share.auto.offset.reset`),
        with IncrementalAlterConfigs (other keys keep their values). Raises the broker's error
        (InvalidConfigError, ...) naming the resource."""
        if sum((topic is not None, broker_id is not None, broker_default, group is not None)) != 1:
            raise ValueError("alter_configs needs exactly one of topic=, broker_id=, broker_default=True or group=")
        resource_type = TOPIC_RESOURCE if topic is not None else GROUP_RESOURCE if group is not None \
            else BROKER_RESOURCE
        name = topic if topic is not None else group if group is not None else "" if broker_default \
            else str(broker_id)
        ops = [{"name": k, "value": v, "config_operation": 0} for k, v in (set_configs or {}).items()]
        ops += [{"name": k, "value": None, "config_operation": 1} for k in delete]
        request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)(
            resources=[{"resource_type": resource_type, "resource_name": name, "configs": ops}],
            validate_only=validate_only)
        response = await self.cluster.send_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        for result in response.responses:
            if result.error_code:
                what = f"topic {name!r}" if topic is not None else f"group {name!r}" if group is not None \
                    else "the broker defaults" if broker_default else f"broker {name}"
                raise error_for_code(result.error_code, f"altering configs of {what}: "
                                     f"{result.error_message or ''}".rstrip(": "))

    # --- client quotas (KIP-546) ------------------------------------------
    async def alter_client_quotas(self, entity: QuotaEntity, set_quotas: Mapping[str, float] | None = None,
                                  remove: Iterable[str] = (), *, validate_only: bool = False) -> None:
        """Set and remove client quotas (`producer_byte_rate`, `consumer_byte_rate`,
        `request_percentage`, `controller_mutation_rate`; `connection_creation_rate` for an
        ip) of one entity. Raises the broker's error (InvalidRequestError naming the bad key,
        value or entity type)."""
        ops = [{"key": k, "value": float(v), "remove": False} for k, v in (set_quotas or {}).items()]
        ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
        request = request_class(ApiKey.ALTER_CLIENT_QUOTAS)(
            entries=[{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()], "ops": ops}],
            validate_only=validate_only)
        response = await self.cluster.send_any(ApiKey.ALTER_CLIENT_QUOTAS, request)
        for entry in response.entries:
            if entry.error_code:
                raise error_for_code(entry.error_code, f"altering client quotas of {dict(entity)}: "
                                     f"{entry.error_message or ''}".rstrip(": "))

    async def describe_client_quotas(self, components: Iterable[QuotaFilter] = (), *, strict: bool = False
                                     ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """The quota entities matching the filter (Kafka's matching: all of the components
        must match; `strict` leaves out entities with other entity types), with their quotas."""
        request = request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)(
            components=[c.to_wire() for c in components], strict=strict)
        response = await self.cluster.send_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
        if response.error_code:
            raise error_for_code(response.error_code, f"describing client quotas: "
                                 f"{response.error_message or ''}".rstrip(": "))
        return [({e.entity_type: e.entity_name for e in entry.entity},
                 {v.key: v.value for v in entry.values}) for entry in response.entries or []]

    # --- share groups (KIP-932): client/share_group_admin.py -------------------
    async def list_share_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return await share_group_admin.list_share_groups(self.cluster)

    async def describe_share_group(self, group_id: str) -> share_group_admin.ShareGroupView:
        """State, epochs and members with their assignments (GroupIdNotFoundError if none)."""
        return await share_group_admin.describe_share_group(self.cluster, group_id)

    async def describe_share_group_offsets(self, group_id: str, topics: Mapping[str, Iterable[int]] | None = None,
                                           ) -> list[share_group_admin.ShareOffset]:
        """The group's start offset and lag per partition."""
        return await share_group_admin.describe_share_group_offsets(self.cluster, group_id, topics)

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set an empty share group's start offsets."""
        await share_group_admin.alter_share_group_offsets(self.cluster, group_id, offsets)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> None:
        """Forget an empty share group's state for `topics`."""
        await share_group_admin.delete_share_group_offsets(self.cluster, group_id, topics)

    async def delete_share_group(self, group_id: str) -> None:
        """Delete an empty share group."""
        await share_group_admin.delete_share_group(self.cluster, group_id)


def _results(response: Message) -> list:
    for attr in ("topics", "responses", "results"):
        value = getattr(response, attr, None)
        if isinstance(value, list):
            return value
    return []


def _raise_first(results: list, what: str) -> None:
    for r in results:
        if r.error_code:
            message = getattr(r, "error_message", None)
            raise error_for_code(r.error_code, f"{what} {r.name!r}"
                                 + (f": {message}" if message else ""))
