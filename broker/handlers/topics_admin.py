"""CreateTopics, DeleteTopics, CreatePartitions — decided and committed by the controller.

One CreateTopics (or CreatePartitions) request is one user operation, as in
Kafka: the topics that pass this broker's checks go to the controller together,
are decided together and committed as one metadata entry. Their records count
together against MAX_RECORDS_PER_USER_OP (10 000); over it every topic the
controller was asked for gets POLICY_VIOLATION and nothing is committed.

The answer is the outcome of the commit, waited for until the request's
`timeout_ms` (30 s when it is <= 0): success once committed, however slow, or
REQUEST_TIMED_OUT (retriable) while still pending. A retry after a timeout waits
for the pending commit first, so it answers TOPIC_ALREADY_EXISTS only for a topic
that really exists (the message names its layout) and creates it otherwise.

`validate_only` runs the controller's pure decision on the current image and
discards it, so it reports exactly the errors a real request would get.

From v5 (KIP-525) each topic created, or that `validate_only` would create, is answered with
its layout and every config with its source (DescribeConfigs' entries for it), and from v7 its
id, as Kafka 4.4's controller answers them (`_created`). DeleteTopics v5+ answers a message
with each error and v6 deletes by name or by id (`_delete_targets`), with Kafka's messages.

Manual replica assignments (CreateTopics `assignments`, CreatePartitions `assignments`) are
checked by the controller as Kafka does (`controller_decisions.check_manual_assignment`):
INVALID_REPLICA_ASSIGNMENT for an unknown broker, duplicates, uneven replication or a count
that does not match; with an assignment, CreateTopics' counts must be -1 (INVALID_REQUEST).
Topic configs are validated against Kafka 4's full list (raft_meta/config/topic_configs.py).

`controller_mutation_rate` (KIP-599; broker/client_quotas.py `MutationQuota`): each topic that
passes the checks records its partitions (created, added or deleted) on the connection's quota,
in request order; a strict quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+)
refuses a topic with THROTTLING_QUOTA_EXCEEDED while the bucket is below zero. The response
carries the quota's throttle time and the connection is muted for it. Kafka meters this on
the active controller, so one bucket serves the whole cluster; raftka meters it on the broker
that receives the request (docs/operations.md, "Quotas").
"""

from __future__ import annotations

import uuid
from collections import Counter

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker.client_quotas import STRICT_MUTATION_VERSIONS, MutationQuota, user_of
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.handlers.describe_configs import new_topic_configs
from raftka.broker.handlers.metadata import topic_uuid
from raftka.broker.topic_names import topic_name_error
from raftka.client.protocol import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    ErrorCode,
    error_info,
)
from raftka.raft_meta.config import topic_configs
from raftka.raft_meta.controller import controller_decisions as decide
from raftka.raft_meta.controller.controller import TopicResult
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.admin")

DEFAULT = -1
FIRST_CONFIGS_VERSION = 5  # CreateTopics v5+: the new topic's layout and configs (KIP-525)
THROTTLED = (ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")


def _mutation_quota(ctx: BrokerContext, header, conn, api: str) -> MutationQuota:
    quotas = ctx.image.client_quotas
    principal = conn.principal if conn is not None else "User:ANONYMOUS"
    return ctx.client_quotas.mutation.mutation_quota(quotas, user_of(principal), header.client_id or "",
                                                     header.api_version >= STRICT_MUTATION_VERSIONS[api],
                                                     trio.current_time())


def _throttled(quota: MutationQuota, conn) -> int:
    """The response's throttle time; the connection is muted for it (KIP-219)."""
    now = trio.current_time()
    throttle_ms = quota.throttle_time_ms(now)
    if throttle_ms:
        if quota.sensor is not None:
            quota.sensor.throttle_recorded(throttle_ms, now)
        if conn is not None:
            conn.muted_until = max(conn.muted_until, now + throttle_ms / 1000.0)
    return throttle_ms


def _new_partitions(topic: decide.NewTopic) -> int:
    return len(topic.assignments) if topic.assignments else topic.num_partitions or 0


def _precheck(ctx, topic) -> tuple[decide.NewTopic | None, tuple[int, str] | None]:
    """The topic as the controller gets it, or this broker's (error code, message) for it."""
    problem = topic_name_error(topic.name)
    if problem is not None:
        return None, (ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    configs = {c.name: c.value for c in topic.configs}
    try:
        configs = topic_configs.validate(configs)
    except ValueError as exc:
        return None, (ErrorCode.INVALID_CONFIG, str(exc))
    if topic.assignments:
        assignments = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
        if len(assignments) != len(topic.assignments):
            return None, (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a partition is assigned more than once")
        if topic.num_partitions != DEFAULT or topic.replication_factor != DEFAULT:
            return None, (ErrorCode.INVALID_REQUEST, "both num_partitions or replication_factor and a manual "
                                                     "replica assignment were given; expected -1 for both")
        return decide.NewTopic(topic.name, None, None, configs, assignments), None
    partitions = ctx.config.num_partitions if topic.num_partitions == DEFAULT else topic.num_partitions
    rf = ctx.config.default_replication_factor if topic.replication_factor == DEFAULT else topic.replication_factor
    if rf < 1:
        return None, (ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {rf}; expected >= 1")
    return decide.NewTopic(topic.name, partitions, rf, configs), None


async def handle_create_topics(ctx: BrokerContext, header, request, conn=None) -> CreateTopicsResponse:
    answers: dict[int, tuple[int, str | None]] = {}  # request position -> (error code, message)
    asked: list[tuple[int, decide.NewTopic]] = []
    created: dict[int, tuple[decide.NewTopic, str | None]] = {}  # position -> (topic, its id)
    denied = acl_checks.create_topic_denied(ctx, conn, (t.name for t in request.topics))
    quota = _mutation_quota(ctx, header, conn, "CreateTopics")
    # A name given twice is refused, once, and none of its occurrences is created (Kafka's
    # ControllerApis.createTopics).
    counts = Counter(t.name for t in request.topics)
    for position, topic in enumerate(request.topics):
        if counts[topic.name] > 1:
            continue
        if topic.name in denied:
            answers[position] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            continue
        new_topic, refusal = _precheck(ctx, topic)
        if refusal is None and ctx.image.topic_by_name(topic.name) is None \
                and not quota.record(_new_partitions(new_topic), trio.current_time()):
            refusal = THROTTLED
        if refusal is not None:
            answers[position] = refusal
        else:
            asked.append((position, new_topic))
    if asked:
        topics = [t for _, t in asked]
        try:
            if request.validate_only:
                _, errors = decide.create_topics(ctx.image, topics, lambda _: "validate-only")
                results = [TopicResult(t.name, errors.get(t.name)) for t in topics]
            else:
                results = await ctx.controller.create_topics(topics, request.timeout_ms)
                await _wait_hosted(ctx, [r.name for r in results if r.error is None], request.timeout_ms)
        except Exception as exc:  # the whole request: POLICY_VIOLATION, REQUEST_TIMED_OUT, NOT_CONTROLLER
            log.warning("topics.create_refused", topics=len(topics), error=_name(exc), reason=_message(exc))
            results = [TopicResult(t.name, exc) for t in topics]
        for (position, topic), result in zip(asked, results, strict=True):
            if result.error is None:
                answers[position] = (0, None)
                created[position] = (topic, result.topic_id)
                if not request.validate_only:
                    log.info("topic.created", topic=topic.name, partitions=topic.num_partitions,
                             replication_factor=topic.replication_factor, topic_id=result.topic_id)
            else:
                answers[position] = (error_code_for(result.error), _message(result.error))
    first = {topic.name: i for i, topic in reversed(list(enumerate(request.topics)))}
    for name, position in first.items():
        if counts[name] > 1:
            answers[position] = (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    answered = {i: {"name": topic.name, "error_code": answers[i][0], "error_message": answers[i][1]}
                for i, topic in enumerate(request.topics) if i in answers}
    if header.api_version >= FIRST_CONFIGS_VERSION and created:
        describable = {t.name for t, _ in created.values()} - acl_checks.topics_denied(
            ctx, conn, AclOperation.DESCRIBE_CONFIGS, {t.name for t, _ in created.values()})
        for position, (topic, topic_id) in created.items():
            answered[position].update(_created(ctx, topic, topic_id, topic.name in describable))
    return CreateTopicsResponse(throttle_time_ms=_throttled(quota, conn), topics=list(answered.values()))


def _created(ctx: BrokerContext, topic: decide.NewTopic, topic_id: str | None, describable: bool) -> dict:
    """CreateTopics v5+ (KIP-525) for a topic created, or that validate_only would create, as
    Kafka's controller answers it: its id (v7; a fresh one under validate_only, as Kafka), its
    partition count, replication factor and every config with its source, the configs only if
    the caller may DESCRIBE_CONFIGS the topic (else TOPIC_AUTHORIZATION_FAILED in
    topic_config_error_code and -1, -1, no configs)."""
    answer: dict = {"topic_id": uuid.UUID(topic_id) if topic_id else uuid.uuid4()}
    if not describable:
        answer["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return answer
    partitions: int | None
    rf: int | None
    if topic.assignments:
        partitions, rf = len(topic.assignments), len(next(iter(topic.assignments.values())))
    else:
        partitions, rf = topic.num_partitions, topic.replication_factor
    return {**answer, "num_partitions": partitions, "replication_factor": rf,
            "configs": new_topic_configs(ctx, topic.name, dict(topic.configs))}


async def _wait_hosted(ctx, names: list[str], timeout_ms: int | None) -> None:
    """After a successful commit, give this broker's reconcile task until the request's
    timeout to open the partitions it hosts (their logs open in worker threads). The answer
    is success either way: the topic is committed; until a partition is open, requests to
    it get the retriable NOT_LEADER_OR_FOLLOWER."""
    if names and timeout_ms is not None and timeout_ms > 0:
        await ctx.replicas.wait_topics_ready(names, timeout_ms / 1000.0)


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, ControllerError) else str(exc)


def _name(exc: BaseException) -> str:
    return exc.name if isinstance(exc, ControllerError) else type(exc).__name__


# DeleteTopics v5+ answers a message with each error: these with Kafka's description of the code
# (Kafka builds them as `new ApiError(error)`); others with the controller's reason.
_PLAIN_DELETE_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                  ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.THROTTLING_QUOTA_EXCEEDED})
FIRST_DELETE_MESSAGE_VERSION = 5
FIRST_DELETE_BY_ID_VERSION = 6
ZERO_UUID = uuid.UUID(int=0)


def _delete_targets(ctx: BrokerContext, header, request) -> list[tuple[str | None, uuid.UUID, int, str | None]]:
    """(name, id, error code, message) per topic asked: v0-5 name topics; v6 names one or the
    other per topic (both or neither: INVALID_REQUEST, an unknown id: UNKNOWN_TOPIC_ID, with
    Kafka's messages). The id is the existing topic's (zero while unknown)."""
    if header.api_version < FIRST_DELETE_BY_ID_VERSION:
        asked = [(name, ZERO_UUID) for name in request.topic_names]
    else:
        asked = [(state.name, state.topic_id) for state in request.topics]
    targets: list[tuple[str | None, uuid.UUID, int, str | None]] = []
    for name, topic_id in asked:
        if name is not None and topic_id != ZERO_UUID:
            targets.append((name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."))
        elif name is None and topic_id == ZERO_UUID:
            targets.append((None, topic_id, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."))
        elif name is None:
            topic = ctx.image.topics.get(str(topic_id))
            if topic is None:
                targets.append((None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, None))
            else:
                targets.append((topic.name, topic_id, 0, None))
        else:
            topic = ctx.image.topic_by_name(name)
            targets.append((name, ZERO_UUID if topic is None else topic_uuid(topic), 0, None))
    return targets


async def handle_delete_topics(ctx: BrokerContext, header, request, conn=None) -> DeleteTopicsResponse:
    responses = []
    targets = _delete_targets(ctx, header, request)
    denied = acl_checks.delete_topic_denied(ctx, conn, [name for name, _, code, _ in targets if not code and name])
    quota = _mutation_quota(ctx, header, conn, "DeleteTopics")
    for name, topic_id, code, message in targets:
        if code:
            pass
        elif name in denied:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif (existing := ctx.image.topic_by_name(name)) is not None \
                and not quota.record(len(existing.partitions), trio.current_time()):
            code = THROTTLED[0]
        else:
            try:
                await ctx.controller.delete_topic(name, request.timeout_ms)
                log.info("topic.deleted", topic=name)
            except Exception as exc:
                code, message = error_code_for(exc), _message(exc)
        if code and (message is None or code in _PLAIN_DELETE_ERRORS):
            message = error_info(code).description
        responses.append({"name": name, "topic_id": topic_id, "error_code": code,
                          "error_message": message if code else None})
    return DeleteTopicsResponse(throttle_time_ms=_throttled(quota, conn), responses=responses)


async def handle_create_partitions(ctx: BrokerContext, header, request, conn=None) -> CreatePartitionsResponse:
    answers: dict[int, tuple[int, str | None]] = {}
    asked: list[tuple[int, tuple[str, int]]] = []
    assignments: dict[str, list[tuple[int, ...]]] = {}
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.ALTER, (t.name for t in request.topics))
    quota = _mutation_quota(ctx, header, conn, "CreatePartitions")
    for position, topic in enumerate(request.topics):
        if topic.name in denied:
            answers[position] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to ALTER topic {topic.name!r}")
            continue
        existing = ctx.image.topic_by_name(topic.name)
        if existing is not None and topic.count > len(existing.partitions) \
                and not quota.record(topic.count - len(existing.partitions), trio.current_time()):
            answers[position] = THROTTLED
            continue
        if topic.assignments is not None:
            assignments[topic.name] = [tuple(a.broker_ids) for a in topic.assignments]
        asked.append((position, (topic.name, topic.count)))
    if asked:
        totals = [t for _, t in asked]
        try:
            if request.validate_only:
                _, errors = decide.create_partitions_batch(ctx.image, totals, assignments=assignments)
                results = [TopicResult(name, errors.get(name)) for name, _ in totals]
            else:
                results = await ctx.controller.create_partitions(totals, request.timeout_ms,
                                                                 assignments=assignments or None)
                await _wait_hosted(ctx, [r.name for r in results if r.error is None], request.timeout_ms)
        except Exception as exc:  # the whole request
            log.warning("partitions.create_refused", topics=len(totals), error=_name(exc), reason=_message(exc))
            results = [TopicResult(name, exc) for name, _ in totals]
        for (position, _), result in zip(asked, results, strict=True):
            answers[position] = (0, None) if result.error is None else (error_code_for(result.error),
                                                                          _message(result.error))
    return CreatePartitionsResponse(throttle_time_ms=_throttled(quota, conn), results=[
        {"name": topic.name, "error_code": answers[i][0], "error_message": answers[i][1]}
        for i, topic in enumerate(request.topics)])
