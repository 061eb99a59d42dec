"""Metadata: brokers, controller, topics and partitions from the metadata image.

Unknown topics are created on demand when `auto.create.topics.enable` is on
and the client allows it (v4+ `allow_auto_topic_creation`), with
`num.partitions` and `default.replication.factor`; the answer then already
carries the new topic's leaders. All the unknown topics one request names are
created together, as one user operation whose records are capped by
MAX_RECORDS_PER_USER_OP (10 000): a request naming more topics than that
allows gets POLICY_VIOLATION for each of them and creates none.

v10+ carries each topic's id (the image's, new on every re-creation: librdkafka
notices a deleted-and-re-created topic only by it) and may ask for topics by id
(UNKNOWN_TOPIC_ID for an id the image does not know). v9+ is flexible.
"""

from __future__ import annotations

import uuid

import structlog

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.topic_names import INTERNAL_TOPICS, topic_name_error
from raftka.client.protocol import ErrorCode, MetadataResponse
from raftka.raft_meta.controller.controller_decisions import NewTopic
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataImage, TopicImage
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.metadata")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)  # "no topic id" (v10+)
AUTO_CREATE_VISIBLE_TIMEOUT_S = 10.0  # bound on waiting for this broker to see (and open) new topics


def _requested_names(header, request, image: MetadataImage) -> tuple[list[str] | None, list[uuid.UUID]]:
    """(names, unknown topic ids). Names None means every topic (v0: an empty list; v1+: null).

    v10+ may name a topic by its id (name null) instead; an id the image does not know is
    answered UNKNOWN_TOPIC_ID."""
    if request.topics is None:
        return None, []
    if header.api_version == 0 and not request.topics:
        return None, []
    names: list[str] = []
    unknown_ids: list[uuid.UUID] = []
    for t in request.topics:
        if t.name is not None:
            names.append(t.name)
            continue
        topic_id = getattr(t, "topic_id", None) or ZERO_UUID
        topic = image.topics.get(str(topic_id)) if topic_id != ZERO_UUID else None
        if topic is None:
            unknown_ids.append(topic_id)
        else:
            names.append(topic.name)
    return names, unknown_ids


async def handle(ctx: BrokerContext, header, request, conn=None) -> MetadataResponse:
    image: MetadataImage = ctx.image
    names, unknown_ids = _requested_names(header, request, image)
    allow_create = ctx.config.auto_create_topics_enable and (
        header.api_version < 4 or request.allow_auto_topic_creation
    )
    errors: dict[str, int] = {}
    # Not DESCRIBE-able: named ones answer TOPIC_AUTHORIZATION_FAILED (existing or not), the
    # all-topics form leaves them out.
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, image.topic_ids if names is None else names,
                                      log_denied=names is not None)
    errors.update(dict.fromkeys(denied if names is not None else (), ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    if names is not None:
        to_create: list[str] = []
        for name in names:
            if image.topic_by_name(name) is not None or name in errors:
                continue
            problem = topic_name_error(name)
            if problem is not None:
                errors[name] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif not allow_create or name in INTERNAL_TOPICS:
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # until created below
                to_create.append(name)
        create_denied = acl_checks.create_topic_denied(ctx, conn, to_create)
        errors.update(dict.fromkeys(create_denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        to_create = [n for n in to_create if n not in create_denied]
        if to_create:
            errors.update(await _auto_create(ctx, to_create))
            # Committed at the controller; this broker's image may be a moment behind (and its
            # own partitions of them still opening: they answer retriable errors meanwhile).
            await ctx.replicas.wait_topics_ready([n for n in to_create if errors[n] == 0],
                                                 AUTO_CREATE_VISIBLE_TIMEOUT_S)
            image = ctx.image  # includes the topics just created
    brokers = [{"node_id": node_id, "host": host, "port": port, "rack": rack}
               for node_id, host, port, rack in live_broker_endpoints(image, conn)]
    topics = []
    selected = sorted(n for n in image.topic_ids if n not in denied) if names is None else names
    for name in selected:
        topic = image.topic_by_name(name)
        if topic is None or name in denied:
            topics.append({"error_code": errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                           "name": name, "topic_id": ZERO_UUID, "partitions": []})
            continue
        topics.append(_topic_entry(image, topic))
        if getattr(request, "include_topic_authorized_operations", False):
            topics[-1]["topic_authorized_operations"] = authz.authorized_operations(ctx, conn, authz.TOPIC, name)
    for topic_id in unknown_ids:  # the name is nullable from v12 only
        topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None if header.api_version >= 12 else "",
                       "topic_id": topic_id, "partitions": []})
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=ctx.cluster_id,
        controller_id=image.controller.node_id,
        topics=topics,
        cluster_authorized_operations=authz.authorized_operations(
            ctx, conn, authz.CLUSTER, "", getattr(request, "include_cluster_authorized_operations", False)),
    )


def topic_uuid(topic: TopicImage) -> uuid.UUID:
    """The topic's id as the protocol carries it (the image keeps the UUID's text, made by the
    controller when the topic is created: a new one for each re-creation, kept in the metadata
    log across restarts). An id that is not a UUID's text maps to a stable name-based UUID."""
    try:
        return uuid.UUID(topic.topic_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, "raftka-topic:" + topic.topic_id)


def _topic_entry(image: MetadataImage, topic: TopicImage) -> dict:
    partitions = []
    for index, part in sorted(topic.partitions.items()):
        offline = [r for r in part.replicas if not image.is_live(r)]
        partitions.append({
            "error_code": 0 if part.has_leader else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": index,
            "leader_id": part.leader,
            "leader_epoch": part.leader_epoch,
            "replica_nodes": list(part.replicas),
            "isr_nodes": list(part.isr),
            "offline_replicas": offline,
        })
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic_uuid(topic),
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


async def _auto_create(ctx, names: list[str]) -> dict[str, int]:
    """Create `names` as one user operation (one controller call, one commit, the records of
    all of them capped together by MAX_RECORDS_PER_USER_OP); the error code for each.

    A creation still pending at the deadline answers LEADER_NOT_AVAILABLE (Kafka's answer
    for a topic being created: the client asks again); a refused request answers its error
    (POLICY_VIOLATION over the cap) for every name."""
    topics = [NewTopic(name) for name in names]
    try:
        results = await ctx.controller.create_topics(topics)
    except ControllerError as exc:
        log.warning("topic.auto_create_failed", topics=len(names), first=names[0], error=exc.name, reason=exc.message)
        code = ErrorCode.LEADER_NOT_AVAILABLE if exc.name == "REQUEST_TIMED_OUT" else error_code_for(exc)
        return dict.fromkeys(names, code)
    codes = {}
    for result in results:
        if result.error is None:
            log.info("topic.auto_created", topic=result.name, topic_id=result.topic_id)
            codes[result.name] = 0
        elif result.error.name == "TOPIC_ALREADY_EXISTS":  # created by someone else meanwhile
            codes[result.name] = 0
        else:
            log.warning("topic.auto_create_failed", topics=1, first=result.name, error=result.error.name,
                        reason=result.error.message)
            codes[result.name] = error_code_for(result.error)
    return codes


def live_broker_endpoints(image: MetadataImage, conn, *, include_fenced: bool = False,
                          ) -> list[tuple[int, str, int, str | None]]:
    """(node id, host, port, rack) of each live broker (with `include_fenced`, of each
    registered one), on the listener `conn` came in by.

    A broker without that listener is shown by its first one, as before listeners had
    names; a broker with no listener at all is left out.
    """
    listener = conn.listener if conn is not None else None
    endpoints = []
    brokers = [b for _, b in sorted(image.brokers.items())] if include_fenced else image.live_brokers()
    for broker in brokers:
        endpoint = broker.listener(listener) if listener else None
        if endpoint is None and broker.listeners:
            endpoint = (broker.listeners[0][1], broker.listeners[0][2])
        if endpoint is not None:
            endpoints.append((broker.broker_id, endpoint[0], endpoint[1], broker.rack))
    return endpoints
