"""Metadata snapshots: a `MetadataImage` as compact, versioned CBOR, and back (KRaft's snapshots).

The metadata log keeps the latest snapshot (the image at offset N) plus only the records after N
(`raft_meta/quorum/quorum.py`); a restarting node, or a follower that receives a full dump, loads the
snapshot and applies the tail. Pure: no I/O, no clock.

Encoding: one CBOR map

    {"type": "MetadataSnapshot", "v": 1, "offset": N, "cluster_id": str | null,
     "brokers":   [[id, incarnation id, epoch, [[listener, host, port], ...], rack, fenced], ...],
     "topics":    [[topic id, name, [[partition, [replicas], [isr], leader, leader epoch,
                                      partition epoch], ...]], ...],
     "configs":   [[resource type, resource name, [[key, value], ...]], ...],
     "next_producer_id": int, "producer_id_blocks": [[broker, first id, size], ...],
     "controller": [node id, epoch], "request_ids": [oldest ... newest],
     "acls":      [[acl id, resource type, name, pattern type, principal, host, operation,
                    permission type], ...]}

Version 2 added "acls"; a version-1 snapshot (written before ACLs existed) still loads, with
none. An older node refuses a version-2 snapshot rather than load it without its ACLs.
     "scram": [[user, mechanism id, salt, stored key, server key, iterations], ...]}  (optional)
     "quotas": [[[[entity type, name | null], ...], [[key, value], ...]], ...]  (optional)

Lists keep the image's insertion order, so decoding gives back an equal image whose maps iterate
in the same order (`topic_ids` is rebuilt from `topics`). `image_digest` hashes a canonical
(sorted) form instead: two images with the same content have the same digest.

`decode_snapshot` raises `SnapshotError` naming the part that is wrong; it never returns a
half-built image.
"""

from __future__ import annotations

import hashlib
from typing import Any

import cbor2

from raftka.raft_meta.controller import quota_decisions as client_quotas
from raftka.raft_meta.metadata.image import (
    BrokerRegistration,
    ControllerImage,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    ScramCredentialImage,
    SnapshotLoaded,
    TopicImage,
)
from raftka.raft_meta.security.acls import AclBinding, binding_error

SNAPSHOT_TYPE = "MetadataSnapshot"
SNAPSHOT_VERSION = 2
READABLE_VERSIONS = (1, 2)


class SnapshotError(ValueError):
    """Bytes that are not a metadata snapshot this code can load."""


def _body(image: MetadataImage) -> dict[str, Any]:
    return {
        "type": SNAPSHOT_TYPE,
        "v": SNAPSHOT_VERSION,
        "offset": image.offset,
        "cluster_id": image.cluster_id,
        "brokers": [
            [b.broker_id, b.incarnation_id, b.epoch, [list(lst) for lst in b.listeners], b.rack, b.fenced]
            for b in image.brokers.values()
        ],
        "topics": [
            [t.topic_id, t.name, [
                [index, list(p.replicas), list(p.isr), p.leader, p.leader_epoch, p.partition_epoch,
                 *([list(p.adding_replicas), list(p.removing_replicas)] if p.reassigning else [])]
                for index, p in t.partitions.items()
            ]]
            for t in image.topics.values()
        ],
        "configs": [[kind, name, [[k, v] for k, v in entries.items()]] for (kind, name), entries in image.configs.items()],
        "next_producer_id": image.next_producer_id,
        "producer_id_blocks": [[broker, first, size] for broker, (first, size) in image.producer_id_blocks.items()],
        "controller": [image.controller.node_id, image.controller.epoch],
        "request_ids": list(image.request_id_order),
        "acls": [[acl_id, *binding.to_wire()] for acl_id, binding in image.acls.items()],
        "scram": [[name, mech, c.salt, c.stored_key, c.server_key, c.iterations]
                  for (name, mech), c in image.scram_credentials.items()],
        "quotas": [[[list(part) for part in entity], [[k, v] for k, v in values.items()]]
                   for entity, values in image.client_quotas.items()],
    }


def encode_snapshot(image: MetadataImage) -> bytes:
    """The image as snapshot bytes (tagged with its type and version)."""
    return cbor2.dumps(_body(image))


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        raise SnapshotError(f"{what}: expected an integer, got {value!r}")
    return value


def _str(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise SnapshotError(f"{what}: expected a string, got {value!r}")
    return value


def _list(value: Any, what: str, length: int | None = None) -> list:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        expected = "a list" if length is None else f"a list of {length} items"
        raise SnapshotError(f"{what}: expected {expected}, got {value!r:.200}")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    return tuple(_int(v, what) for v in _list(value, what))


def _broker(item: Any) -> BrokerRegistration:
    broker_id, incarnation, epoch, listeners, rack, fenced = _list(item, "broker", 6)
    what = f"broker {broker_id!r}"
    if not isinstance(fenced, bool):
        raise SnapshotError(f"{what} fenced: expected a boolean, got {fenced!r}")
    return BrokerRegistration(
        broker_id=_int(broker_id, "broker id"),
        incarnation_id=_str(incarnation, f"{what} incarnation id"),  # type: ignore[arg-type]
        epoch=_int(epoch, f"{what} epoch"),
        listeners=tuple(
            (_str(n, f"{what} listener"), _str(h, f"{what} host"), _int(p, f"{what} port"))  # type: ignore[misc]
            for n, h, p in (_list(entry, f"{what} listener", 3) for entry in _list(listeners, f"{what} listeners"))
        ),
        rack=_str(rack, f"{what} rack", optional=True),
        fenced=fenced,
    )


def _topic(item: Any) -> TopicImage:
    topic_id, name, partitions = _list(item, "topic", 3)
    what = f"topic {name!r}"
    parts: dict[int, PartitionImage] = {}
    for entry in _list(partitions, f"{what} partitions"):
        fields = _list(entry, f"{what} partition")
        if len(fields) == 6:  # no reassignment in progress
            fields = [*fields, [], []]
        index, replicas, isr, leader, leader_epoch, partition_epoch, adding, removing = _list(
            fields, f"{what} partition", 8)
        index = _int(index, f"{what} partition index")
        where = f"{what} partition {index}"
        if index in parts:
            raise SnapshotError(f"{where}: listed twice")
        parts[index] = PartitionImage(_ints(replicas, f"{where} replicas"), _ints(isr, f"{where} isr"),
                                      _int(leader, f"{where} leader"), _int(leader_epoch, f"{where} leader epoch"),
                                      _int(partition_epoch, f"{where} partition epoch"),
                                      _ints(adding, f"{where} adding replicas"),
                                      _ints(removing, f"{where} removing replicas"))
    return TopicImage(name=_str(name, "topic name"), topic_id=_str(topic_id, f"{what} id"),  # type: ignore[arg-type]
                      partitions=parts)


def decode_snapshot(raw: bytes) -> MetadataImage:
    """The image a snapshot holds; raises `SnapshotError` (never another exception)."""
    try:
        body = cbor2.loads(raw)
    except Exception as exc:  # cbor2 raises several types on garbage
        raise SnapshotError(f"not CBOR: {exc}") from None
    if not isinstance(body, dict):
        raise SnapshotError(f"expected a CBOR map, got {type(body).__name__}")
    if body.get("type") != SNAPSHOT_TYPE:
        raise SnapshotError(f"type {body.get('type')!r} is not {SNAPSHOT_TYPE!r}")
    if body.get("v") not in READABLE_VERSIONS:
        raise SnapshotError(f"snapshot version {body.get('v')!r} is not supported (expected one of "
                            f"{list(READABLE_VERSIONS)})")
    missing = {"offset", "cluster_id", "brokers", "topics", "configs", "next_producer_id", "producer_id_blocks",
               "controller", "request_ids"} - body.keys()
    if missing:
        raise SnapshotError(f"fields missing: {sorted(missing)}")
    brokers = {b.broker_id: b for b in map(_broker, _list(body["brokers"], "brokers"))}
    topics: dict[str, TopicImage] = {}
    topic_ids: dict[str, str] = {}
    for topic in map(_topic, _list(body["topics"], "topics")):
        if topic.topic_id in topics or topic.name in topic_ids:
            raise SnapshotError(f"topic {topic.name!r} ({topic.topic_id}) listed twice")
        topics[topic.topic_id] = topic
        topic_ids[topic.name] = topic.topic_id
    configs: dict[tuple[str, str], dict[str, str]] = {}
    for item in _list(body["configs"], "configs"):
        kind, name, entries = _list(item, "config resource", 3)
        key = (_str(kind, "config resource type"), _str(name, "config resource name"))
        configs[key] = {_str(k, f"config {key} key"): _str(v, f"config {key} value")  # type: ignore[misc]
                        for k, v in (_list(e, f"config {key} entry", 2) for e in _list(entries, f"config {key}"))}
    blocks = {}
    for item in _list(body["producer_id_blocks"], "producer_id_blocks"):
        broker, first, size = (_int(v, "producer id block") for v in _list(item, "producer id block", 3))
        blocks[broker] = (first, size)
    node_id, epoch = (_int(v, "controller") for v in _list(body["controller"], "controller", 2))
    scram: dict[tuple[str, int], ScramCredentialImage] = {}
    for item in _list(body.get("scram", []), "scram"):  # absent in snapshots written before it existed
        name, mech, salt, stored, server, iterations = _list(item, "scram credential", 6)
        if not all(isinstance(v, bytes) for v in (salt, stored, server)):
            raise SnapshotError("scram credential: salt and keys must be bytes")
        scram[(_str(name, "scram user"), _int(mech, "scram mechanism"))] = ScramCredentialImage(  # type: ignore[index]
            salt, stored, server, _int(iterations, "scram iterations"))
    quotas = _client_quotas(body.get("quotas", []))  # absent in snapshots written before quotas
    order = tuple(_str(r, "request id") for r in _list(body["request_ids"], "request_ids"))
    if len(set(order)) != len(order):
        raise SnapshotError("request_ids: an id is listed twice")
    acls = _acls(body.get("acls", []) if body["v"] == 1 else body.get("acls"))
    return MetadataImage(
        offset=_int(body["offset"], "offset"),
        cluster_id=_str(body["cluster_id"], "cluster_id", optional=True),
        brokers=brokers,
        topics=topics,
        topic_ids=topic_ids,
        configs=configs,
        next_producer_id=_int(body["next_producer_id"], "next_producer_id"),
        producer_id_blocks=blocks,
        controller=ControllerImage(node_id, epoch),
        request_ids=frozenset(order),  # type: ignore[arg-type]
        request_id_order=order,  # type: ignore[arg-type]
        acls=acls,
        scram_credentials=scram,
        client_quotas=quotas,
    )


def _client_quotas(value: Any) -> dict:
    quotas: dict = {}
    for item in _list(value, "quotas"):
        parts, values = _list(item, "client quota", 2)
        entity = tuple((_str(t, "quota entity type"), _str(n, "quota entity name", optional=True))
                       for t, n in (_list(p, "quota entity part", 2) for p in _list(parts, "quota entity")))
        problem = client_quotas.entity_problem(entity)  # type: ignore[arg-type]
        if problem is not None or entity != client_quotas.entity_of(entity):  # type: ignore[arg-type]
            raise SnapshotError(f"client quota entity {entity}: {problem or 'not in canonical order'}")
        if entity in quotas:
            raise SnapshotError(f"client quota entity {entity}: listed twice")
        entries = {}
        for k, v in (_list(e, "client quota value", 2) for e in _list(values, "client quota values")):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SnapshotError(f"client quota {entity} {k!r}: expected a number, got {v!r}")
            entries[_str(k, "client quota key")] = float(v)
        quotas[entity] = entries
    return quotas


def _acls(value: Any) -> dict[str, AclBinding]:
    acls: dict[str, AclBinding] = {}
    for item in _list(value, "acls"):
        acl_id, *fields = _list(item, "acl", 8)
        acl_id = _str(acl_id, "acl id")
        try:
            binding = AclBinding.from_wire(fields)
        except (TypeError, ValueError) as exc:
            raise SnapshotError(f"acl {acl_id}: {exc}") from None
        problem = binding_error(binding)
        if problem is not None:
            raise SnapshotError(f"acl {acl_id}: {problem}")
        if acl_id in acls:
            raise SnapshotError(f"acl {acl_id}: listed twice")
        acls[acl_id] = binding  # type: ignore[index]
    return acls


def image_digest(image: MetadataImage) -> str:
    """SHA-256 (hex) of the image's content; equal content, equal digest (map order ignored)."""
    body = _body(image)
    body["brokers"].sort(key=lambda b: b[0])
    for topic in body["topics"]:
        topic[2].sort(key=lambda p: p[0])
    body["topics"].sort(key=lambda t: t[0])
    for config in body["configs"]:
        config[2].sort()
    body["configs"].sort(key=lambda c: (c[0], c[1]))
    body["producer_id_blocks"].sort()
    body["acls"].sort(key=lambda a: a[0])
    body["scram"].sort()
    for quota in body["quotas"]:
        quota[1].sort()
    body["quotas"].sort(key=lambda q: [[t, "" if n is None else n, n is None] for t, n in q[0]])
    return hashlib.sha256(cbor2.dumps(body, canonical=True)).hexdigest()


def snapshot_delta(before: MetadataImage, after: MetadataImage) -> MetadataDelta:
    """A delta that stands for the whole change from `before` to a loaded snapshot `after`:
    every broker, topic, partition and config of either image, and the topics `after` lacks
    as removed. Publishers treat it like any other delta (Kafka's loader publishes a snapshot
    the same way)."""
    return MetadataDelta(
        offset=after.offset,
        record=SnapshotLoaded(after.offset),
        accepted=True,
        brokers=frozenset(before.brokers) | frozenset(after.brokers),
        topics=frozenset(after.topics),
        removed_topics=tuple(t for topic_id, t in before.topics.items()
                             if after.topics.get(topic_id) is None
                             or after.topics[topic_id].name != t.name),
        partitions=frozenset((topic_id, p) for topic_id, t in after.topics.items() for p in t.partitions),
        configs=frozenset(before.configs) | frozenset(after.configs),
        producer_ids=True,
        controller=True,
        acls=True,
        client_quotas=True,
    )
