"""`apply(image, record, offset) -> (image, delta)`: the metadata state machine.

Pure and deterministic: every node applies the same committed records in the
same order and reaches the same image, including the same decisions to
*reject* a record (stale partition epoch, stale broker epoch, duplicate
request id, unknown topic, ...). A rejected record changes nothing but the
image offset; the delta says why. `apply` never raises.
"""

from __future__ import annotations

import dataclasses

from raftka.raft_meta.image import (
    REQUEST_ID_MEMORY,
    BrokerRegistration,
    ControllerImage,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from raftka.raft_meta.records import (
    NO_LEADER,
    Config,
    ControllerClaim,
    FenceBroker,
    MetadataRecord,
    Partition,
    PartitionChange,
    ProducerIds,
    RecordBatch,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UndecodableRecord,
    UnfenceBroker,
    UnregisterBroker,
    decode_record,
)

CONFIG_RESOURCE_TYPES = ("topic", "broker", "cluster")


class _Reject(Exception):
    """A record that must not change the image; the message is the delta's reason."""


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
    deltas = []
    first = True
    for raw in record.records:
        image, delta = apply(image, decode_record(raw), offset, continuation=not first)
        deltas.append(delta)
        first = False
    if first:  # an empty batch still moves the image to its offset
        image = dataclasses.replace(image, offset=offset)
    return image, deltas


def apply(
    image: MetadataImage, record: MetadataRecord | UndecodableRecord, offset: int, *, continuation: bool = False
) -> tuple[MetadataImage, MetadataDelta]:
    """Apply one record. `continuation`: a later record of the same RecordBatch entry (same offset)."""
    if offset < image.offset or (offset == image.offset and not continuation):
        return image, MetadataDelta(
            offset, record, False, f"offset {offset} is not after the image offset {image.offset}"
        )
    moved = dataclasses.replace(image, offset=offset)
    if isinstance(record, UndecodableRecord):
        return moved, MetadataDelta(offset, record, False, record.reason)
    request_id = record.request_id
    if request_id is not None and request_id in image.request_ids:
        return moved, MetadataDelta(offset, record, False, f"duplicate request id {request_id!r}")
    handler = _HANDLERS.get(type(record))
    try:
        if handler is None:
            raise _Reject(f"no handler for record type {type(record).__name__}")
        new_image, delta = handler(moved, record, offset)
    except _Reject as exc:
        return moved, MetadataDelta(offset, record, False, str(exc))
    except Exception as exc:  # malformed field types from a foreign writer: skip, never crash
        return moved, MetadataDelta(offset, record, False, f"malformed {type(record).__name__}: {exc!r}")
    if request_id is not None:
        order = (*new_image.request_id_order, request_id)[-REQUEST_ID_MEMORY:]
        new_image = dataclasses.replace(new_image, request_ids=frozenset(order), request_id_order=order)
    return new_image, delta


def _broker_with_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> BrokerRegistration:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise _Reject(f"broker {broker_id} is not registered")
    if broker.epoch != broker_epoch:
        raise _Reject(f"broker {broker_id} epoch {broker_epoch} is stale; the registered epoch is {broker.epoch}")
    return broker


def _with_broker(image: MetadataImage, broker: BrokerRegistration) -> MetadataImage:
    return dataclasses.replace(image, brokers={**image.brokers, broker.broker_id: broker})


def _register(image: MetadataImage, r: RegisterBroker, offset: int):
    broker = BrokerRegistration(
        broker_id=int(r.broker_id),
        incarnation_id=str(r.incarnation_id),
        epoch=offset,
        listeners=tuple((str(n), str(h), int(p)) for n, h, p in r.listeners),
        rack=r.rack,
        fenced=True,
    )
    return _with_broker(image, broker), MetadataDelta(offset, r, True, brokers=frozenset({broker.broker_id}))


def _unregister(image: MetadataImage, r: UnregisterBroker, offset: int):
    _broker_with_epoch(image, r.broker_id, r.broker_epoch)
    brokers = {k: v for k, v in image.brokers.items() if k != r.broker_id}
    return dataclasses.replace(image, brokers=brokers), MetadataDelta(
        offset, r, True, brokers=frozenset({r.broker_id})
    )


def _set_fenced(fenced: bool):
    def handler(image: MetadataImage, r: FenceBroker | UnfenceBroker, offset: int):
        broker = _broker_with_epoch(image, r.broker_id, r.broker_epoch)
        updated = dataclasses.replace(broker, fenced=fenced)
        return _with_broker(image, updated), MetadataDelta(offset, r, True, brokers=frozenset({r.broker_id}))

    return handler


def _topic(image: MetadataImage, r: Topic, offset: int):
    if r.name in image.topic_ids:
        raise _Reject(f"topic name {r.name!r} already exists with id {image.topic_ids[r.name]}")
    if r.topic_id in image.topics:
        raise _Reject(f"topic id {r.topic_id} already exists (topic {image.topics[r.topic_id].name!r})")
    topic = TopicImage(name=r.name, topic_id=r.topic_id, partitions={})
    configs = dict(image.configs)
    if r.configs:
        configs[("topic", r.name)] = {str(k): str(v) for k, v in r.configs}
    new = dataclasses.replace(
        image,
        topics={**image.topics, r.topic_id: topic},
        topic_ids={**image.topic_ids, r.name: r.topic_id},
        configs=configs,
    )
    return new, MetadataDelta(
        offset, r, True, topics=frozenset({r.topic_id}), configs=frozenset({("topic", r.name)}) if r.configs else frozenset()
    )


def _remove_topic(image: MetadataImage, r: RemoveTopic, offset: int):
    topic = image.topics.get(r.topic_id)
    if topic is None:
        raise _Reject(f"topic id {r.topic_id} does not exist")
    new = dataclasses.replace(
        image,
        topics={k: v for k, v in image.topics.items() if k != r.topic_id},
        topic_ids={k: v for k, v in image.topic_ids.items() if k != topic.name},
        configs={k: v for k, v in image.configs.items() if k != ("topic", topic.name)},
    )
    return new, MetadataDelta(
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


def _with_partition(image: MetadataImage, topic: TopicImage, index: int, part: PartitionImage) -> MetadataImage:
    updated = dataclasses.replace(topic, partitions={**topic.partitions, index: part})
    return dataclasses.replace(image, topics={**image.topics, topic.topic_id: updated})


def _partition(image: MetadataImage, r: Partition, offset: int):
    topic = image.topics.get(r.topic_id)
    if topic is None:
        raise _Reject(f"topic id {r.topic_id} does not exist")
    if r.partition in topic.partitions:
        raise _Reject(f"partition {topic.name}-{r.partition} already exists")
    if r.partition < 0:
        raise _Reject(f"partition index {r.partition} is negative")
    replicas, isr = tuple(r.replicas), tuple(r.isr)
    _check_assignment(replicas, isr, r.leader)
    part = PartitionImage(replicas, isr, r.leader, r.leader_epoch, r.partition_epoch)
    return _with_partition(image, topic, r.partition, part), MetadataDelta(
        offset, r, True, topics=frozenset({r.topic_id}), partitions=frozenset({(r.topic_id, r.partition)})
    )


def _partition_change(image: MetadataImage, r: PartitionChange, offset: int):
    topic = image.topics.get(r.topic_id)
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
    leader_epoch = current.leader_epoch + 1 if leader != current.leader else current.leader_epoch
    part = PartitionImage(replicas, isr, leader, leader_epoch, current.partition_epoch + 1)
    return _with_partition(image, topic, r.partition, part), MetadataDelta(
        offset, r, True, topics=frozenset({r.topic_id}), partitions=frozenset({(r.topic_id, r.partition)})
    )


def _config(image: MetadataImage, r: Config, offset: int):
    if r.resource_type not in CONFIG_RESOURCE_TYPES:
        raise _Reject(f"config resource type {r.resource_type!r} is not one of {CONFIG_RESOURCE_TYPES}")
    if r.resource_type == "topic" and r.resource_name not in image.topic_ids:
        raise _Reject(f"config for topic {r.resource_name!r}, which does not exist")
    key = (r.resource_type, r.resource_name)
    entries = dict(image.configs.get(key, {}))
    if r.value is None:
        entries.pop(r.name, None)
    else:
        entries[r.name] = str(r.value)
    configs = {k: v for k, v in image.configs.items() if k != key}
    if entries:
        configs[key] = entries
    return dataclasses.replace(image, configs=configs), MetadataDelta(offset, r, True, configs=frozenset({key}))


def _producer_ids(image: MetadataImage, r: ProducerIds, offset: int):
    _broker_with_epoch(image, r.broker_id, r.broker_epoch)
    if r.first_producer_id != image.next_producer_id:
        raise _Reject(
            f"producer id block starting at {r.first_producer_id} is stale; the next free id is {image.next_producer_id}"
        )
    if r.size <= 0:
        raise _Reject(f"producer id block size {r.size} must be > 0")
    new = dataclasses.replace(
        image,
        next_producer_id=r.first_producer_id + r.size,
        producer_id_blocks={**image.producer_id_blocks, r.broker_id: (r.first_producer_id, r.size)},
    )
    return new, MetadataDelta(offset, r, True, producer_ids=True)


def _controller_claim(image: MetadataImage, r: ControllerClaim, offset: int):
    current = image.controller
    if r.epoch < current.epoch or (r.epoch == current.epoch and r.node_id != current.node_id):
        raise _Reject(
            f"controller claim by node {r.node_id} for epoch {r.epoch} is stale; "
            f"node {current.node_id} holds epoch {current.epoch}"
        )
    if image.cluster_id is not None and r.cluster_id != image.cluster_id:
        raise _Reject(f"controller claim for cluster {r.cluster_id!r}; this metadata log is cluster {image.cluster_id!r}")
    new = dataclasses.replace(
        image, controller=ControllerImage(r.node_id, r.epoch), cluster_id=image.cluster_id or r.cluster_id
    )
    return new, MetadataDelta(offset, r, True, controller=True)


_HANDLERS = {
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
}


def replay(records: list[tuple[int, MetadataRecord | UndecodableRecord]], image: MetadataImage | None = None) -> MetadataImage:
    """Apply `(offset, record)` pairs in order (tests, tools, snapshot reloads)."""
    image = image or MetadataImage()
    for offset, record in records:
        image, _ = apply_entry(image, record, offset)
    return image
