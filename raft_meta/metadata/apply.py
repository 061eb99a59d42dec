"""`apply(image, record, offset) -> (image, delta)`: the metadata state machine.

Pure and deterministic: every node applies the same committed records in the
same order and reaches the same image, including the same decisions to
*reject* a record (stale partition epoch, stale broker epoch, duplicate
request id, unknown topic, ...). A rejected record changes nothing but the
image offset; the delta says why. `apply` never raises.

Cost: one entry (a record, or a `RecordBatch` of N records) is applied to a
`_Draft` of the image that copies each map it changes once per entry and then
changes the copy in place, so an entry costs O(N + the maps it touches), not
O(N x map size): a topic's N Partition records no longer copy its partition
map N times. The draft's maps are fresh objects nobody else holds; the image
built from it is never changed afterwards, so images stay immutable to every
caller. Handlers check everything before their first change to the draft (a
rejected record must change nothing).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

from raftka.raft_meta.controller import quota_decisions as client_quotas
from raftka.raft_meta.metadata.image import (
    REQUEST_ID_MEMORY,
    BrokerRegistration,
    ControllerImage,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    ScramCredentialImage,
    TopicImage,
)
from raftka.raft_meta.metadata.records import (
    NO_LEADER,
    AccessControlEntry,
    ClientQuota,
    Config,
    ControllerClaim,
    FenceBroker,
    MetadataRecord,
    Partition,
    PartitionChange,
    ProducerIds,
    RecordBatch,
    RegisterBroker,
    RemoveAccessControlEntry,
    RemoveTopic,
    RemoveUserScramCredential,
    Topic,
    UndecodableRecord,
    UnfenceBroker,
    UnregisterBroker,
    UserScramCredential,
    decode_record,
)
from raftka.raft_meta.security.acls import AclBinding, binding_error

CONFIG_RESOURCE_TYPES = ("topic", "broker", "cluster", "client_metrics", "group")


class _Reject(Exception):
    """A record that must not change the image; the message is the delta's reason."""


class _Draft:
    """The image one entry is building: each map is copied on its first change, then changed in place.

    Read the current state through the attributes (`brokers`, `topics`, ...); change it only
    through the `*_for_change` methods, which hand out this draft's own copies.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.base = image
        self.offset = image.offset
        self.cluster_id = image.cluster_id
        self.next_producer_id = image.next_producer_id
        self.controller = image.controller
        self.brokers = image.brokers
        self.topics = image.topics
        self.topic_ids = image.topic_ids
        self.configs = image.configs
        self.producer_id_blocks = image.producer_id_blocks
        self.acls = image.acls
        self.scram_credentials = image.scram_credentials
        self.client_quotas = image.client_quotas
        self._owned: set[str] = set()  # names of the maps above that are this draft's copies
        self._owned_partitions: set[str] = set()  # topic ids whose partition map is this draft's copy
        self._request_order: deque[str] | None = None
        self._request_ids: set[str] | None = None

    def _own(self, name: str) -> dict[Any, Any]:
        if name not in self._owned:
            setattr(self, name, dict(getattr(self, name)))
            self._owned.add(name)
        owned: dict[Any, Any] = getattr(self, name)
        return owned

    def brokers_for_change(self) -> dict[int, BrokerRegistration]:
        return self._own("brokers")

    def topics_for_change(self) -> dict[str, TopicImage]:
        return self._own("topics")

    def topic_ids_for_change(self) -> dict[str, str]:
        return self._own("topic_ids")

    def configs_for_change(self) -> dict[tuple[str, str], dict[str, str]]:
        return self._own("configs")

    def producer_id_blocks_for_change(self) -> dict[int, tuple[int, int]]:
        return self._own("producer_id_blocks")

    def acls_for_change(self) -> dict[str, AclBinding]:
        return self._own("acls")
    def scram_credentials_for_change(self) -> dict[tuple[str, int], ScramCredentialImage]:
        return self._own("scram_credentials")

    def client_quotas_for_change(self) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        return self._own("client_quotas")

    def partitions_for_change(self, topic_id: str) -> dict[int, PartitionImage]:
        """The partition map of an existing topic, as this draft's own copy (the topic's
        TopicImage in `topics` is replaced by one holding that copy)."""
        topic = self.topics[topic_id]
        if topic_id not in self._owned_partitions:
            topic = dataclasses.replace(topic, partitions=dict(topic.partitions))
            self.topics_for_change()[topic_id] = topic
            self._owned_partitions.add(topic_id)
        return topic.partitions

    def add_topic(self, topic: TopicImage) -> None:
        """A new topic whose (empty or fresh) partition map belongs to this draft."""
        self.topics_for_change()[topic.topic_id] = topic
        self._owned_partitions.add(topic.topic_id)

    def remove_topic(self, topic_id: str) -> TopicImage:
        """Drop a topic; its last TopicImage is returned and never changed again."""
        self._owned_partitions.discard(topic_id)
        return self.topics_for_change().pop(topic_id)

    def seen_request(self, request_id: str) -> bool:
        if self._request_ids is not None:
            return request_id in self._request_ids
        return request_id in self.base.request_ids

    def remember_request(self, request_id: str) -> None:
        """Keep the last REQUEST_ID_MEMORY request ids, oldest forgotten first."""
        if self._request_order is None:
            self._request_order = deque(self.base.request_id_order)
            self._request_ids = set(self.base.request_ids)
        assert self._request_ids is not None
        self._request_order.append(request_id)
        self._request_ids.add(request_id)
        while len(self._request_order) > REQUEST_ID_MEMORY:
            self._request_ids.discard(self._request_order.popleft())

    def image(self) -> MetadataImage:
        base = self.base
        changes = {name: getattr(self, name) for name in self._owned}
        if self._request_order is not None:
            order = tuple(self._request_order)
            changes.update(request_ids=frozenset(order), request_id_order=order)
        if self.offset != base.offset:
            changes["offset"] = self.offset
        if self.cluster_id != base.cluster_id:
            changes["cluster_id"] = self.cluster_id
        if self.next_producer_id != base.next_producer_id:
            changes["next_producer_id"] = self.next_producer_id
        if self.controller != base.controller:
            changes["controller"] = self.controller
        return dataclasses.replace(base, **changes) if changes else base


def apply_entry(
    image: MetadataImage, record: MetadataRecord | UndecodableRecord, offset: int
) -> tuple[MetadataImage, list[MetadataDelta]]:
    """Apply one committed Raft entry: a record, or a `RecordBatch` whose records all apply
    at the entry's offset, in order, before anyone sees the image (atomic)."""
    if not isinstance(record, RecordBatch):
        image, delta = apply(image, record, offset)
        return image, [delta]
    if offset <= image.offset:
        return image, [MetadataDelta(offset, record, False,
                                     f"offset {offset} is not after the image offset {image.offset}")]
    draft = _Draft(image)
    draft.offset = offset  # an empty batch still moves the image to its offset
    deltas = [_apply_to(draft, decode_record(raw), offset) for raw in record.records]
    return draft.image(), deltas


def apply(
    image: MetadataImage, record: MetadataRecord | UndecodableRecord, offset: int, *, continuation: bool = False
) -> tuple[MetadataImage, MetadataDelta]:
    """Apply one record. `continuation`: a later record of the same RecordBatch entry (same offset)."""
    if offset < image.offset or (offset == image.offset and not continuation):
        return image, MetadataDelta(
            offset, record, False, f"offset {offset} is not after the image offset {image.offset}"
        )
    draft = _Draft(image)
    draft.offset = offset
    delta = _apply_to(draft, record, offset)
    return draft.image(), delta


def _apply_to(draft: _Draft, record: MetadataRecord | UndecodableRecord, offset: int) -> MetadataDelta:
    """Apply one record to `draft` (whose offset is already `offset`); never raises."""
    if isinstance(record, UndecodableRecord):
        return MetadataDelta(offset, record, False, record.reason)
    request_id = record.request_id
    try:
        if request_id is not None and draft.seen_request(request_id):
            return MetadataDelta(offset, record, False, f"duplicate request id {request_id!r}")
        handler = _HANDLERS.get(type(record))
        if handler is None:
            raise _Reject(f"no handler for record type {type(record).__name__}")
        delta = handler(draft, record, offset)
    except _Reject as exc:
        return MetadataDelta(offset, record, False, str(exc))
    except Exception as exc:  # malformed field types from a foreign writer: skip, never crash
        return MetadataDelta(offset, record, False, f"malformed {type(record).__name__}: {exc!r}")
    if request_id is not None:
        draft.remember_request(request_id)
    return delta


def _broker_with_epoch(draft: _Draft, broker_id: int, broker_epoch: int) -> BrokerRegistration:
    broker = draft.brokers.get(broker_id)
    if broker is None:
        raise _Reject(f"broker {broker_id} is not registered")
    if broker.epoch != broker_epoch:
        raise _Reject(f"broker {broker_id} epoch {broker_epoch} is stale; the registered epoch is {broker.epoch}")
    return broker


def _register(draft: _Draft, r: RegisterBroker, offset: int) -> MetadataDelta:
    broker = BrokerRegistration(
        broker_id=int(r.broker_id),
        incarnation_id=str(r.incarnation_id),
        epoch=offset,
        listeners=tuple((str(n), str(h), int(p)) for n, h, p in r.listeners),
        rack=r.rack,
        fenced=True,
    )
    draft.brokers_for_change()[broker.broker_id] = broker
    return MetadataDelta(offset, r, True, brokers=frozenset({broker.broker_id}))


def _unregister(draft: _Draft, r: UnregisterBroker, offset: int) -> MetadataDelta:
    _broker_with_epoch(draft, r.broker_id, r.broker_epoch)
    del draft.brokers_for_change()[r.broker_id]
    return MetadataDelta(offset, r, True, brokers=frozenset({r.broker_id}))


def _set_fenced(fenced: bool) -> Callable[[_Draft, FenceBroker | UnfenceBroker, int], MetadataDelta]:
    def handler(draft: _Draft, r: FenceBroker | UnfenceBroker, offset: int) -> MetadataDelta:
        broker = _broker_with_epoch(draft, r.broker_id, r.broker_epoch)
        draft.brokers_for_change()[r.broker_id] = dataclasses.replace(broker, fenced=fenced)
        return MetadataDelta(offset, r, True, brokers=frozenset({r.broker_id}))

    return handler


def _topic(draft: _Draft, r: Topic, offset: int) -> MetadataDelta:
    if r.name in draft.topic_ids:
        raise _Reject(f"topic name {r.name!r} already exists with id {draft.topic_ids[r.name]}")
    if r.topic_id in draft.topics:
        raise _Reject(f"topic id {r.topic_id} already exists (topic {draft.topics[r.topic_id].name!r})")
    configs = {str(k): str(v) for k, v in r.configs} if r.configs else None
    draft.add_topic(TopicImage(name=r.name, topic_id=r.topic_id, partitions={}))
    draft.topic_ids_for_change()[r.name] = r.topic_id
    if configs is not None:
        draft.configs_for_change()[("topic", r.name)] = configs
    return MetadataDelta(
        offset, r, True, topics=frozenset({r.topic_id}), configs=frozenset({("topic", r.name)}) if r.configs else frozenset()
    )


def _remove_topic(draft: _Draft, r: RemoveTopic, offset: int) -> MetadataDelta:
    if draft.topics.get(r.topic_id) is None:
        raise _Reject(f"topic id {r.topic_id} does not exist")
    topic = draft.remove_topic(r.topic_id)
    draft.topic_ids_for_change().pop(topic.name, None)
    if ("topic", topic.name) in draft.configs:
        del draft.configs_for_change()[("topic", topic.name)]
    return MetadataDelta(
        offset,
        r,
        True,
        removed_topics=(topic,),
        partitions=frozenset((r.topic_id, p) for p in topic.partitions),
        configs=frozenset({("topic", topic.name)}),
    )


def _check_assignment(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> None:
    if not replicas or len(set(replicas)) != len(replicas):
        raise _Reject(f"replicas {list(replicas)} must be non-empty and distinct")
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise _Reject(f"ISR {list(isr)} must be distinct members of replicas {list(replicas)}")
    if leader != NO_LEADER and leader not in isr:
        raise _Reject(f"leader {leader} is not in ISR {list(isr)}")


def _partition(draft: _Draft, r: Partition, offset: int) -> MetadataDelta:
    topic = draft.topics.get(r.topic_id)
    if topic is None:
        raise _Reject(f"topic id {r.topic_id} does not exist")
    if r.partition in topic.partitions:
        raise _Reject(f"partition {topic.name}-{r.partition} already exists")
    if r.partition < 0:
        raise _Reject(f"partition index {r.partition} is negative")
    replicas, isr = tuple(r.replicas), tuple(r.isr)
    _check_assignment(replicas, isr, r.leader)
    part = PartitionImage(replicas, isr, r.leader, r.leader_epoch, r.partition_epoch)
    draft.partitions_for_change(r.topic_id)[r.partition] = part
    return MetadataDelta(offset, r, True, topics=frozenset({r.topic_id}), partitions=frozenset({(r.topic_id, r.partition)}))


def _partition_change(draft: _Draft, r: PartitionChange, offset: int) -> MetadataDelta:
    topic = draft.topics.get(r.topic_id)
    current = topic.partitions.get(r.partition) if topic else None
    if topic is None or current is None:
        raise _Reject(f"partition {r.topic_id}/{r.partition} does not exist")
    if r.partition_epoch != current.partition_epoch:
        raise _Reject(
            f"partition {topic.name}-{r.partition} change decided on partition epoch {r.partition_epoch}; "
            f"current epoch is {current.partition_epoch}"
        )
    replicas = current.replicas if r.replicas is None else tuple(r.replicas)
    isr = current.isr if r.isr is None else tuple(r.isr)
    leader = current.leader if r.leader is None else r.leader
    _check_assignment(replicas, isr, leader)
    adding, removing = _reassignment(r, current, replicas)
    leader_epoch = current.leader_epoch + 1 if leader != current.leader else current.leader_epoch
    part = PartitionImage(replicas, isr, leader, leader_epoch, current.partition_epoch + 1, adding, removing)
    draft.partitions_for_change(r.topic_id)[r.partition] = part
    return MetadataDelta(offset, r, True, topics=frozenset({r.topic_id}), partitions=frozenset({(r.topic_id, r.partition)}))


def _reassignment(r: PartitionChange, current: PartitionImage,
                  replicas: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (adding, removing) replicas after `r`: None fields keep the current ones. Both must
    be distinct members of `replicas`, disjoint, and leave a non-empty target."""
    adding = current.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas)
    removing = current.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas)
    for name, members in (("adding", adding), ("removing", removing)):
        if len(set(members)) != len(members) or not set(members) <= set(replicas):
            raise _Reject(f"{name} replicas {list(members)} must be distinct members of replicas {list(replicas)}")
    if set(adding) & set(removing):
        raise _Reject(f"adding replicas {list(adding)} and removing replicas {list(removing)} overlap")
    if removing and set(removing) == set(replicas):
        raise _Reject(f"removing replicas {list(removing)} would leave no target replica")
    return adding, removing


def _config(draft: _Draft, r: Config, offset: int) -> MetadataDelta:
    if r.resource_type not in CONFIG_RESOURCE_TYPES:
        raise _Reject(f"config resource type {r.resource_type!r} is not one of {CONFIG_RESOURCE_TYPES}")
    if r.resource_type == "topic" and r.resource_name not in draft.topic_ids:
        raise _Reject(f"config for topic {r.resource_name!r}, which does not exist")
    key = (r.resource_type, r.resource_name)
    entries = dict(draft.configs.get(key, {}))  # one resource's entries: small, and shared with older images
    if r.value is None:
        entries.pop(r.name, None)
    else:
        entries[r.name] = str(r.value)
    configs = draft.configs_for_change()
    configs.pop(key, None)  # a changed resource moves to the end, as it always has
    if entries:
        configs[key] = entries
    return MetadataDelta(offset, r, True, configs=frozenset({key}))


def _producer_ids(draft: _Draft, r: ProducerIds, offset: int) -> MetadataDelta:
    _broker_with_epoch(draft, r.broker_id, r.broker_epoch)
    if r.first_producer_id != draft.next_producer_id:
        raise _Reject(
            f"producer id block starting at {r.first_producer_id} is stale; the next free id is {draft.next_producer_id}"
        )
    if r.size <= 0:
        raise _Reject(f"producer id block size {r.size} must be > 0")
    draft.next_producer_id = r.first_producer_id + r.size
    draft.producer_id_blocks_for_change()[r.broker_id] = (r.first_producer_id, r.size)
    return MetadataDelta(offset, r, True, producer_ids=True)


def _controller_claim(draft: _Draft, r: ControllerClaim, offset: int) -> MetadataDelta:
    current = draft.controller
    if r.epoch < current.epoch or (r.epoch == current.epoch and r.node_id != current.node_id):
        raise _Reject(
            f"controller claim by node {r.node_id} for epoch {r.epoch} is stale; "
            f"node {current.node_id} holds epoch {current.epoch}"
        )
    if draft.cluster_id is not None and r.cluster_id != draft.cluster_id:
        raise _Reject(f"controller claim for cluster {r.cluster_id!r}; this metadata log is cluster {draft.cluster_id!r}")
    draft.controller = ControllerImage(r.node_id, r.epoch)
    draft.cluster_id = draft.cluster_id or r.cluster_id
    return MetadataDelta(offset, r, True, controller=True)


def _access_control_entry(draft: _Draft, r: AccessControlEntry, offset: int) -> MetadataDelta:
    if not isinstance(r.acl_id, str) or not r.acl_id:
        raise _Reject(f"ACL id {r.acl_id!r} is not a non-empty string")
    if r.acl_id in draft.acls:
        raise _Reject(f"ACL id {r.acl_id} already exists: {draft.acls[r.acl_id].describe()}")
    binding = AclBinding.from_record(r)
    for value in (r.resource_type, r.pattern_type, r.operation, r.permission_type):
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Reject(f"ACL {r.acl_id} enum field {value!r} is not an integer")
    for text in (r.resource_name, r.principal, r.host):
        if not isinstance(text, str):
            raise _Reject(f"ACL {r.acl_id} field {text!r:.200} is not a string")
    problem = binding_error(binding)
    if problem is not None:
        raise _Reject(f"ACL {r.acl_id} is invalid: {problem}")
    draft.acls_for_change()[r.acl_id] = binding
    return MetadataDelta(offset, r, True, acls=True)


def _remove_access_control_entry(draft: _Draft, r: RemoveAccessControlEntry, offset: int) -> MetadataDelta:
    if r.acl_id not in draft.acls:
        raise _Reject(f"ACL id {r.acl_id!r} does not exist")
    del draft.acls_for_change()[r.acl_id]
    return MetadataDelta(offset, r, True, acls=True)
SCRAM_MECHANISM_IDS = (1, 2)  # SCRAM-SHA-256, SCRAM-SHA-512
SCRAM_ITERATIONS = (4096, 16384)


def _user_scram_credential(draft: _Draft, r: UserScramCredential, offset: int) -> MetadataDelta:
    if not r.name:
        raise _Reject("SCRAM credential with an empty user name")
    if r.mechanism not in SCRAM_MECHANISM_IDS:
        raise _Reject(f"SCRAM mechanism {r.mechanism} is not one of {SCRAM_MECHANISM_IDS}")
    low, high = SCRAM_ITERATIONS
    if not low <= r.iterations <= high:
        raise _Reject(f"SCRAM iterations {r.iterations} outside {low}..{high}")
    if not (r.salt and r.stored_key and r.server_key):
        raise _Reject(f"SCRAM credential of {r.name!r} lacks its salt, StoredKey or ServerKey")
    draft.scram_credentials_for_change()[(r.name, r.mechanism)] = ScramCredentialImage(
        bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations)
    return MetadataDelta(offset, r, True)


def _remove_user_scram_credential(draft: _Draft, r: RemoveUserScramCredential, offset: int) -> MetadataDelta:
    if (r.name, r.mechanism) not in draft.scram_credentials:
        raise _Reject(f"no SCRAM credential of user {r.name!r} for mechanism {r.mechanism} to remove")
    del draft.scram_credentials_for_change()[(r.name, r.mechanism)]
    return MetadataDelta(offset, r, True)


def _client_quota(draft: _Draft, r: ClientQuota, offset: int) -> MetadataDelta:
    components = tuple((t, n) for t, n in r.entity)
    problem = client_quotas.entity_problem(components)
    if problem is not None:
        raise _Reject(f"client quota entity {list(components)}: {problem}")
    entity = client_quotas.entity_of(components)
    if r.value is not None:
        problem = client_quotas.value_problem(client_quotas.keys_for(entity), r.key, r.value)
        if problem is not None:
            raise _Reject(f"client quota of {client_quotas.describe_entity(entity)}: {problem}")
    values = dict(draft.client_quotas.get(entity, {}))  # one entity's quotas: small, shared with older images
    if r.value is None:
        if r.key not in values:
            raise _Reject(f"no client quota {r.key} of {client_quotas.describe_entity(entity)} to remove")
        del values[r.key]
    else:
        values[r.key] = float(r.value)
    quotas = draft.client_quotas_for_change()
    if values:
        quotas[entity] = values
    else:
        quotas.pop(entity, None)
    return MetadataDelta(offset, r, True, client_quotas=True)


# record type -> its handler (each takes its own record type)
_HANDLERS: dict[type[Any], Callable[[_Draft, Any, int], MetadataDelta]] = {
    RegisterBroker: _register,
    UnregisterBroker: _unregister,
    FenceBroker: _set_fenced(True),
    UnfenceBroker: _set_fenced(False),
    Topic: _topic,
    RemoveTopic: _remove_topic,
    Partition: _partition,
    PartitionChange: _partition_change,
    Config: _config,
    ProducerIds: _producer_ids,
    ControllerClaim: _controller_claim,
    AccessControlEntry: _access_control_entry,
    RemoveAccessControlEntry: _remove_access_control_entry,
    UserScramCredential: _user_scram_credential,
    RemoveUserScramCredential: _remove_user_scram_credential,
    ClientQuota: _client_quota,
}


def replay(records: list[tuple[int, MetadataRecord | UndecodableRecord]], image: MetadataImage | None = None) -> MetadataImage:
    """Apply `(offset, record)` pairs in order (tests, tools, snapshot reloads)."""
    image = image or MetadataImage()
    for offset, record in records:
        image, _ = apply_entry(image, record, offset)
    return image
