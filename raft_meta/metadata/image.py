"""The immutable metadata image (Kafka's `org.apache.kafka.image`) and its delta.

Every field is frozen; the dicts inside are never mutated after
construction (`apply` builds new ones), so an image can be shared freely
between tasks. Publishers receive `(delta, new_image)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftka.raft_meta.metadata.records import NO_LEADER, MetadataRecord, UndecodableRecord
from raftka.raft_meta.security.acls import AclBinding

# How many recent request ids the image remembers for deduplication. A retry
# arrives within seconds, i.e. a handful of records later; 4096 is generous.
REQUEST_ID_MEMORY = 4096


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    epoch: int  # the offset of its RegisterBroker record
    listeners: tuple[tuple[str, str, int], ...]
    rack: str | None
    fenced: bool = True

    def listener(self, name: str) -> tuple[str, int] | None:
        for listener_name, host, port in self.listeners:
            if listener_name == name:
                return host, port
        return None


@dataclass(frozen=True)
class PartitionImage:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # A reassignment in progress (KIP-455): `replicas` is target + removing; the target
    # replicas are `replicas` minus `removing_replicas`.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


@dataclass(frozen=True)
class ScramCredentialImage:
    """A user's SCRAM credential for one mechanism (UserScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class ControllerImage:
    node_id: int = -1
    epoch: int = -1


@dataclass(frozen=True)
class MetadataImage:
    offset: int = 0  # offset of the last record applied (0: none)
    cluster_id: str | None = None  # learnt from the first ControllerClaim
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicImage] = field(default_factory=dict)  # by topic id
    topic_ids: dict[str, str] = field(default_factory=dict)  # name -> topic id
    # (resource_type, resource_name) -> {name: value}; types: topic, broker, cluster, client_metrics
    configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    next_producer_id: int = 0
    producer_id_blocks: dict[int, tuple[int, int]] = field(default_factory=dict)  # broker -> (first, size)
    controller: ControllerImage = ControllerImage()
    request_ids: frozenset[str] = frozenset()
    request_id_order: tuple[str, ...] = ()
    acls: dict[str, AclBinding] = field(default_factory=dict)  # by ACL id, in creation order
    # (user name, mechanism id 1|2) -> credential (UserScramCredential records)
    scram_credentials: dict[tuple[str, int], ScramCredentialImage] = field(default_factory=dict)
    # client quota entity (sorted (type, name|None) pairs) -> {quota key: value} (ClientQuota records)
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)

    def topic_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics.get(topic_id)

    def partition(self, topic_id: str, partition: int) -> PartitionImage | None:
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered, unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def is_live(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def topic_config(self, topic_name: str, key: str) -> str | None:
        return self.configs.get(("topic", topic_name), {}).get(key)

    def cluster_config(self, key: str) -> str | None:
        return self.configs.get(("cluster", ""), {}).get(key)


@dataclass(frozen=True)
class SnapshotLoaded:
    """The `record` of the delta a loader publishes when it loads a snapshot at `offset`
    instead of applying the records before it (`raft_meta/metadata/snapshot.py::snapshot_delta`)."""

    offset: int
    request_id: None = None


@dataclass(frozen=True)
class MetadataDelta:
    """What one record changed. `accepted` False means the record was skipped (see `reason`).

    A delta for a loaded snapshot (`record` is `SnapshotLoaded`) names everything in the image."""

    offset: int
    record: MetadataRecord | UndecodableRecord | SnapshotLoaded
    accepted: bool
    reason: str | None = None
    brokers: frozenset[int] = frozenset()
    topics: frozenset[str] = frozenset()  # topic ids created or changed
    removed_topics: tuple[TopicImage, ...] = ()
    partitions: frozenset[tuple[str, int]] = frozenset()  # (topic id, partition)
    configs: frozenset[tuple[str, str]] = frozenset()
    producer_ids: bool = False
    controller: bool = False
    acls: bool = False  # an ACL was added or removed
    client_quotas: bool = False  # a client quota was set or removed
