"""Versioned metadata records and their CBOR encoding.

A record is a CBOR map `{"type": <name>, "v": <version>, "rid": <request id
or null>, ...fields}`. `request_id` lets `apply` recognise a retried
submission whose first attempt did commit (pysyncobj's LEADER_CHANGED and
timeouts do not mean "not applied"). `decode_record` never raises: bytes it
cannot understand (unknown type, newer version, malformed fields) come back
as `UndecodableRecord`, which `apply` logs and skips.

Sentinels: `NO_LEADER` (-1) is Kafka's "no leader" partition leader id.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import cbor2

NO_LEADER = -1


@dataclass(frozen=True)
class RegisterBroker:
    """A broker (re)joins; its broker epoch becomes this record's offset. It starts fenced."""

    TYPE: ClassVar[str] = "RegisterBroker"
    VERSION: ClassVar[int] = 1
    broker_id: int
    incarnation_id: str
    listeners: tuple[tuple[str, str, int], ...]  # (listener name, host, port)
    rack: str | None = None
    request_id: str | None = None


@dataclass(frozen=True)
class UnregisterBroker:
    TYPE: ClassVar[str] = "UnregisterBroker"
    VERSION: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int
    request_id: str | None = None


@dataclass(frozen=True)
class FenceBroker:
    TYPE: ClassVar[str] = "FenceBroker"
    VERSION: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int
    request_id: str | None = None


@dataclass(frozen=True)
class UnfenceBroker:
    TYPE: ClassVar[str] = "UnfenceBroker"
    VERSION: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int
    request_id: str | None = None


@dataclass(frozen=True)
class Topic:
    TYPE: ClassVar[str] = "Topic"
    VERSION: ClassVar[int] = 1
    name: str
    topic_id: str  # UUID text
    configs: tuple[tuple[str, str], ...] = ()
    request_id: str | None = None


@dataclass(frozen=True)
class RemoveTopic:
    TYPE: ClassVar[str] = "RemoveTopic"
    VERSION: ClassVar[int] = 1
    topic_id: str
    request_id: str | None = None


@dataclass(frozen=True)
class Partition:
    """A new partition (creation only; later changes are PartitionChange)."""

    TYPE: ClassVar[str] = "Partition"
    VERSION: ClassVar[int] = 1
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    request_id: str | None = None


@dataclass(frozen=True)
class PartitionChange:
    """Leader/ISR/replicas change decided on `partition_epoch`; None fields stay unchanged.

    Applying it bumps the partition epoch, and the leader epoch when the
    leader changes. `unclean` marks a leader elected from outside the ISR.
    `adding_replicas` / `removing_replicas` (KIP-455, Kafka's PartitionChangeRecord fields of
    the same names): a reassignment in progress; None keeps the current ones, () ends it.
    """

    TYPE: ClassVar[str] = "PartitionChange"
    VERSION: ClassVar[int] = 1
    topic_id: str
    partition: int
    partition_epoch: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    unclean: bool = False
    request_id: str | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Config:
    """Set (value) or delete (value None) one config of a resource.

    resource_type is "topic" (resource_name = topic name), "broker"
    (resource_name = broker id as text), "cluster" (resource_name = ""), "client_metrics"
    (resource_name = a KIP-714 subscription's name) or "group" (resource_name = group id,
    KIP-848 group configs).
    """

    TYPE: ClassVar[str] = "Config"
    VERSION: ClassVar[int] = 1
    resource_type: str
    resource_name: str
    name: str
    value: str | None
    request_id: str | None = None


@dataclass(frozen=True)
class ProducerIds:
    """Allocates producer ids [first_producer_id, first_producer_id + size) to a broker."""

    TYPE: ClassVar[str] = "ProducerIds"
    VERSION: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int
    first_producer_id: int
    size: int
    request_id: str | None = None


@dataclass(frozen=True)
class ControllerClaim:
    """The Raft leader claims the controller role; epoch = its Raft term."""

    TYPE: ClassVar[str] = "ControllerClaim"
    VERSION: ClassVar[int] = 1
    node_id: int
    epoch: int
    cluster_id: str
    request_id: str | None = None


@dataclass(frozen=True)
class RecordBatch:
    """Several encoded records committed as ONE Raft entry, so every node applies all of them
    together (KRaft's atomic record batches): a topic and all its partitions appear at once,
    never half-created after a controller failover or a timed-out commit."""

    TYPE: ClassVar[str] = "RecordBatch"
    VERSION: ClassVar[int] = 0
    records: tuple[bytes, ...]
    request_id: str | None = None


@dataclass(frozen=True)
class AccessControlEntry:
    """One ACL is added (Kafka's AccessControlEntryRecord): `acl_id` (UUID text), then the ACL's
    seven fields with Kafka's enum codes (raft_meta/security/acls.py)."""

    TYPE: ClassVar[str] = "AccessControlEntry"
    VERSION: ClassVar[int] = 1
    acl_id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    request_id: str | None = None


@dataclass(frozen=True)
class UserScramCredential:
    """Kafka's UserScramCredentialRecord: one user's credential for one mechanism (1 =
    SCRAM-SHA-256, 2 = SCRAM-SHA-512). Never the password: salt, StoredKey, ServerKey."""

    TYPE: ClassVar[str] = "UserScramCredential"
    VERSION: ClassVar[int] = 1
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    request_id: str | None = None


@dataclass(frozen=True)
class RemoveAccessControlEntry:
    """The ACL `acl_id` is removed (Kafka's RemoveAccessControlEntryRecord)."""

    TYPE: ClassVar[str] = "RemoveAccessControlEntry"
    VERSION: ClassVar[int] = 1
    acl_id: str
    request_id: str | None = None


@dataclass(frozen=True)
class RemoveUserScramCredential:
    """Kafka's RemoveUserScramCredentialRecord."""

    TYPE: ClassVar[str] = "RemoveUserScramCredential"
    VERSION: ClassVar[int] = 1
    name: str
    mechanism: int
    request_id: str | None = None


@dataclass(frozen=True)
class ClientQuota:
    """Set (value) or remove (value None) one client quota of an entity (Kafka's QuotaRecord).

    `entity` is the quota entity as sorted `(entity type, name)` pairs, the type one of "user",
    "client-id", "ip" and the name None for that type's default entity ("<default>" in
    kafka-configs); `key` is a quota key (`producer_byte_rate`, ...; raft_meta/controller/quota_decisions.py).
    """

    TYPE: ClassVar[str] = "ClientQuota"
    VERSION: ClassVar[int] = 1
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float | None
    request_id: str | None = None


@dataclass(frozen=True)
class UndecodableRecord:
    """Bytes that are not a record this code understands; `apply` skips them."""

    raw: bytes
    reason: str
    request_id: str | None = None


MetadataRecord = (
    RegisterBroker
    | UnregisterBroker
    | FenceBroker
    | UnfenceBroker
    | Topic
    | RemoveTopic
    | Partition
    | PartitionChange
    | Config
    | ProducerIds
    | ControllerClaim
    | RecordBatch
    | AccessControlEntry
    | RemoveAccessControlEntry
    | UserScramCredential
    | RemoveUserScramCredential
    | ClientQuota
)

RECORD_TYPES: dict[str, type] = {
    cls.TYPE: cls
    for cls in (
        RegisterBroker,
        UnregisterBroker,
        FenceBroker,
        UnfenceBroker,
        Topic,
        RemoveTopic,
        Partition,
        PartitionChange,
        Config,
        ProducerIds,
        ControllerClaim,
        RecordBatch,
        AccessControlEntry,
        RemoveAccessControlEntry,
        UserScramCredential,
        RemoveUserScramCredential,
        ClientQuota,
    )
}


def encode_record(record: MetadataRecord) -> bytes:
    body: dict[str, Any] = {"type": record.TYPE, "v": record.VERSION}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        body["rid" if f.name == "request_id" else f.name] = value
    return cbor2.dumps(body)


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def decode_record(raw: bytes) -> MetadataRecord | UndecodableRecord:
    """Decode one record; never raises."""
    try:
        body = cbor2.loads(raw)
    except Exception as exc:  # cbor2 raises several types on garbage
        return UndecodableRecord(bytes(raw), f"not CBOR: {exc}")
    if not isinstance(body, dict):
        return UndecodableRecord(bytes(raw), f"expected a CBOR map, got {type(body).__name__}")
    request_id = body.get("rid") if isinstance(body.get("rid"), str) else None
    type_name = body.get("type")
    cls = RECORD_TYPES.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        return UndecodableRecord(bytes(raw), f"unknown record type {type_name!r}", request_id)
    version = body.get("v")
    if version != cls.VERSION:
        return UndecodableRecord(
            bytes(raw), f"{type_name} version {version!r} is not supported (expected {cls.VERSION})", request_id
        )
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = "rid" if f.name == "request_id" else f.name
        if key in body:
            kwargs[f.name] = _tuples(body[key])
    try:
        return cls(**kwargs)
    except TypeError as exc:
        return UndecodableRecord(bytes(raw), f"{type_name} fields malformed: {exc}", request_id)
