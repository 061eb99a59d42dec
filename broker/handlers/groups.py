"""The group APIs: FindCoordinator, Join/Sync/Heartbeat/LeaveGroup, OffsetCommit/Fetch,
DescribeGroups, ListGroups, DeleteGroups — request translation around `ctx.groups`
(broker/group/group_coordinator.py), where the decisions are made."""

from __future__ import annotations

import time

import structlog

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.group.group_coordinator import OFFSETS_TOPIC, CoordinatorError
from raftka.broker.group.group_state import CommittedOffset, GroupPhase
from raftka.broker.group.share_persister import SHARE_STATE_TOPIC, ShareStateKey
from raftka.broker.handlers.metadata import ZERO_UUID, topic_uuid
from raftka.broker.txn.txn_records import TRANSACTION_STATE_TOPIC
from raftka.client.protocol import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ErrorCode,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.groups")

OffsetDeleteResponse = response_class(ApiKey.OFFSET_DELETE)

# JoinGroup v7+ and SyncGroup v5+ name the protocol type (KIP-559); JoinGroup v9+ may tell a
# rejoined static leader to skip the assignment (KIP-814).
FIRST_JOIN_PROTOCOL_TYPE_VERSION = 7
FIRST_SKIP_ASSIGNMENT_VERSION = 9
FIRST_SYNC_PROTOCOL_VERSION = 5

FIRST_BATCHED_FIND_COORDINATOR_VERSION = 4
# OffsetFetch v8 batches groups; OffsetCommit and OffsetFetch v10 name topics by id.
FIRST_BATCHED_OFFSET_FETCH_VERSION = 8
FIRST_TOPIC_ID_OFFSET_COMMIT_VERSION = 10
FIRST_TOPIC_ID_OFFSET_FETCH_VERSION = 10

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
FIRST_SHARE_FIND_COORDINATOR_VERSION = 6
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _peer_host(conn) -> str:
    """Kafka shows a member's host as "/<ip>"."""
    peer = conn.peer if conn is not None else ""
    return "/" + peer.rsplit(":", 1)[0] if peer else ""


async def handle_find_coordinator(ctx: BrokerContext, header, request, conn=None) -> FindCoordinatorResponse:
    """v4+ look up a batch of keys (KIP-699), each answered as v0-3 answer one, without the
    message (Kafka's KafkaApis); v5 may answer TRANSACTION_ABORTABLE, which raftka never does;
    v6 adds key type 2, the share coordinator (INVALID_REQUEST in older versions, as Kafka)."""
    share_too_old = (request.key_type == KEY_TYPE_SHARE
                     and header.api_version < FIRST_SHARE_FIND_COORDINATOR_VERSION)

    async def one_key(key: str) -> FindCoordinatorResponse:
        if share_too_old:
            return FindCoordinatorResponse(
                throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, node_id=-1, host="", port=-1,
                error_message=f"key type 2 (share) needs FindCoordinator v6; got v{header.api_version}")
        return await find_coordinator(ctx, request.key_type, key, conn)

    if header.api_version < FIRST_BATCHED_FIND_COORDINATOR_VERSION:
        return await one_key(request.key)
    coordinators = []
    for key in request.coordinator_keys:
        one = await one_key(key)
        coordinators.append({"key": key, "node_id": one.node_id, "host": one.host, "port": one.port,
                             "error_code": one.error_code, "error_message": None})
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)


async def find_coordinator(ctx: BrokerContext, key_type: int, key: str, conn) -> FindCoordinatorResponse:
    """The coordinator of one group id (key_type 0) or transactional id (1), in v0-3's layout."""
    def fail(code: int, message: str) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                       node_id=-1, host="", port=-1)

    if key_type == KEY_TYPE_TRANSACTION:
        return await find_transaction_coordinator(ctx, key, conn, fail)
    if key_type == KEY_TYPE_SHARE:
        return await find_share_coordinator(ctx, key, conn, fail)
    if key_type != KEY_TYPE_GROUP:
        return fail(ErrorCode.INVALID_REQUEST,
                    f"key_type {key_type} is unknown; expected 0 (group), 1 (transaction) or 2 (share)")
    if not key:
        return fail(ErrorCode.INVALID_REQUEST, "the group id is empty; expected a non-empty string")
    if acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, key):
        return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to DESCRIBE group {key!r}")
    groups = ctx.groups
    try:
        await groups.ensure_offsets_topic()
    except Exception as exc:
        code = error_code_for(exc)
        if code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {OFFSETS_TOPIC}: {exc}")
    try:
        index = groups.partition_for(key)
    except CoordinatorError as exc:
        return fail(exc.code, str(exc))
    return coordinator_endpoint(ctx, conn, OFFSETS_TOPIC, index, fail)


def coordinator_endpoint(ctx, conn, topic_name: str, index: int, fail) -> FindCoordinatorResponse:
    """The leader of `topic_name`-`index` as a FindCoordinator answer, on the caller's listener."""
    image = ctx.image
    topic = image.topic_by_name(topic_name)
    part = topic.partitions.get(index) if topic is not None else None
    if part is None or part.leader < 0 or not image.is_live(part.leader):
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic_name}-{index} has no live leader")
    broker = image.brokers.get(part.leader)
    listener = conn.listener if conn is not None else None
    endpoint = broker.listener(listener) if (broker is not None and listener) else None
    if endpoint is None and broker is not None and broker.listeners:
        endpoint = (broker.listeners[0][1], broker.listeners[0][2])
    if endpoint is None:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {part.leader} has no endpoint")
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                   node_id=part.leader, host=endpoint[0], port=endpoint[1])


async def find_transaction_coordinator(ctx, transactional_id: str, conn, fail) -> FindCoordinatorResponse:
    """FindCoordinator key_type 1: the leader of the id's `__transaction_state` partition
    (the topic is created by the first lookup, as in Kafka)."""
    if not transactional_id:
        return fail(ErrorCode.INVALID_REQUEST, "the transactional id is empty; expected a non-empty string")
    if acl_checks.transactional_id_error(ctx, conn, AclOperation.DESCRIBE, transactional_id):
        return fail(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    f"not authorized to DESCRIBE transactional id {transactional_id!r}")
    txns = ctx.txns
    try:
        await txns.ensure_topic()
    except Exception as exc:
        if error_code_for(exc) != ErrorCode.TOPIC_ALREADY_EXISTS:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {TRANSACTION_STATE_TOPIC}: {exc}")
    try:
        index = txns.partition_for(transactional_id)
    except CoordinatorError as exc:
        return fail(exc.code, str(exc))
    return coordinator_endpoint(ctx, conn, TRANSACTION_STATE_TOPIC, index, fail)


async def find_share_coordinator(ctx, key: str, conn, fail) -> FindCoordinatorResponse:
    """FindCoordinator key_type 2 (v6+): the leader of the `__share_group_state` partition the
    share partition key `"<group>:<topic id>:<partition>"` hashes to (the topic is created by
    the first lookup). A broker's request: it needs CLUSTER_ACTION, as in Kafka."""
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.CLUSTER_ACTION)
    if denied:
        return fail(denied, "not authorized to CLUSTER_ACTION the cluster")
    try:
        share_key = ShareStateKey.from_coordinator_key(key)
    except ValueError as exc:
        return fail(ErrorCode.INVALID_REQUEST, str(exc))
    coordinator = ctx.share_coordinator
    if coordinator is None:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, "this broker runs no share coordinator")
    try:
        await coordinator.ensure_topic()
    except Exception as exc:
        if error_code_for(exc) != ErrorCode.TOPIC_ALREADY_EXISTS:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {SHARE_STATE_TOPIC}: {exc}")
    try:
        index = coordinator.partition_for(share_key)
    except CoordinatorError as exc:
        return fail(exc.code, str(exc))
    return coordinator_endpoint(ctx, conn, SHARE_STATE_TOPIC, index, fail)


async def handle_join_group(ctx: BrokerContext, header, request, conn=None) -> JoinGroupResponse:
    """From v7 an error answers a null protocol name (Kafka's GroupCoordinator), a success the
    group's protocol type, which is the request's (a group of another type refuses the join);
    v8's reason is not used."""
    version = header.api_version
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return JoinGroupResponse(throttle_time_ms=0, error_code=denied, generation_id=-1,
                                 protocol_name=None if version >= FIRST_JOIN_PROTOCOL_TYPE_VERSION else "",
                                 leader="", member_id=request.member_id, members=[])
    result = await ctx.groups.join(
        request.group_id, request.member_id, client_id=header.client_id or "",
        client_host=_peer_host(conn), session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4, group_instance_id=request.group_instance_id,
        support_skipping_assignment=version >= FIRST_SKIP_ASSIGNMENT_VERSION)
    ok = result.error_code == 0
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_type=request.protocol_type if ok else None,
        protocol_name=result.protocol_name if version >= FIRST_JOIN_PROTOCOL_TYPE_VERSION and not ok
        else result.protocol_name or "",
        leader=result.leader, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                 for m in result.members])


async def handle_sync_group(ctx: BrokerContext, header, request, conn=None) -> SyncGroupResponse:
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return SyncGroupResponse(throttle_time_ms=0, error_code=denied, assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    named = header.api_version >= FIRST_SYNC_PROTOCOL_VERSION
    result = await ctx.groups.sync(
        request.group_id, request.member_id, request.generation_id, assignments, request.group_instance_id,
        protocol_type=request.protocol_type if named else None,
        protocol_name=request.protocol_name if named else None)
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


async def handle_heartbeat(ctx: BrokerContext, header, request, conn=None) -> HeartbeatResponse:
    code = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id) or ctx.groups.heartbeat(
        request.group_id, request.member_id, request.generation_id, request.group_instance_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: BrokerContext, header, request, conn=None) -> LeaveGroupResponse:
    if header.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
        for m in request.members:
            if getattr(m, "reason", None):  # v5+ (KIP-800): logged, as Kafka does
                log.info("group.leave_reason", group=request.group_id, member=m.member_id, reason=m.reason)
    else:
        members = [(request.member_id, None)]
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=denied, members=[])
    top, codes = ctx.groups.leave(request.group_id, members)
    if header.api_version >= 3:
        top = top if top in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                             ErrorCode.COORDINATOR_NOT_AVAILABLE) else 0
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=[
        {"member_id": m, "group_instance_id": i, "error_code": c} for (m, i), c in zip(members, codes, strict=True)])


def _resolve_topics(image, version: int, first_id_version: int, topics) -> list[tuple[object, str | None]]:
    """(response key, topic name) per request topic: from `first_id_version` topics are named
    by id (the key; the name is None for an id the metadata does not know), before by name."""
    if version < first_id_version:
        return [(t.name, t.name) for t in topics]
    resolved = []
    for t in topics:
        topic = image.topics.get(str(t.topic_id)) if t.topic_id != ZERO_UUID else None
        resolved.append((t.topic_id, topic.name if topic is not None else None))
    return resolved


def _topic_key(version: int, first_id_version: int, image, name: str) -> object:
    """How a response names `name`: by topic id from `first_id_version` (None when the topic
    has none any more), by name before."""
    if version < first_id_version:
        return name
    topic = image.topic_by_name(name)
    return topic_uuid(topic) if topic is not None else None


async def handle_offset_commit(ctx: BrokerContext, header, request, conn=None) -> OffsetCommitResponse:
    """v9 is v8 for a classic group, with GROUP_ID_NOT_FOUND for a member's commit to an unknown
    group; consumer-protocol members must use it (KIP-848). v10 names topics by id: an unknown
    id answers UNKNOWN_TOPIC_ID (Kafka's KafkaApis.handleOffsetCommitRequest)."""
    version = header.api_version
    now = int(time.time() * 1000)
    offsets = {}
    errors: dict[tuple[object, int], int] = {}  # answered here, before the coordinator's
    image = ctx.image
    keys: dict[str, object] = {}  # topic name -> how the response names it
    resolved = _resolve_topics(image, version, FIRST_TOPIC_ID_OFFSET_COMMIT_VERSION, request.topics)
    group_denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    # READ on the group (else every partition fails with 30), then READ on each topic (29).
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ,
                                      (name for _, name in resolved if name is not None))
    for t, (key, name) in zip(request.topics, resolved, strict=True):
        topic = image.topic_by_name(name) if name is not None else None
        for p in t.partitions:
            if group_denied:  # nothing about the topics is revealed to a caller not allowed the group
                errors[(key, p.partition_index)] = group_denied
            elif name is None:
                errors[(key, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
            elif name in denied:  # refused whether it exists or not
                errors[(key, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
                # Kafka's rule: a partition the metadata does not know is answered, not stored.
                errors[(key, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                keys[name] = key
                # v1 carries the commit's timestamp; -1 (and every other version) means now.
                stamp = p.commit_timestamp if version == 1 and p.commit_timestamp >= 0 else now
                offsets[(name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", stamp)
    codes: dict[tuple[object, int], int] = dict(errors)
    if offsets or not errors:
        committed = await ctx.groups.commit(request.group_id, request.member_id,
                                            request.generation_id_or_member_epoch, offsets,
                                            request.group_instance_id, api_version=version)
        codes.update(((keys[name], index), code) for (name, index), code in committed.items())
    topics: dict[object, list[dict]] = {}
    for (key, index), code in codes.items():
        topics.setdefault(key, []).append({"partition_index": index, "error_code": code})
    name_field = "topic_id" if version >= FIRST_TOPIC_ID_OFFSET_COMMIT_VERSION else "name"
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        {name_field: key, "partitions": parts} for key, parts in topics.items()])


def _offset_partition(index: int, committed: CommittedOffset | None, code: int = 0) -> dict:
    return {"partition_index": index,
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": code}


def _fetch_group(ctx: BrokerContext, conn, version: int, group_id: str, topics,
                 member_id: str | None, member_epoch: int, require_stable: bool,
                 ) -> tuple[int, list[tuple[object, list[dict]]]]:
    """One group of OffsetFetch (v8+ batch several): (group error, [(topic key, partitions)]).
    As Kafka's KafkaApis: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED and nothing
    more; then the coordinator (v9+: the member and its epoch, in a consumer-protocol group),
    whose error answers the group with no topics. A named topic the caller may not DESCRIBE
    answers TOPIC_AUTHORIZATION_FAILED per partition, an unknown topic id (v10+)
    UNKNOWN_TOPIC_ID, both after the coordinator's topics; the all-topics form (`topics` None)
    leaves unreadable topics out."""
    code = acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, group_id)
    if code:
        return code, []
    image = ctx.image
    resolved = None if topics is None else _resolve_topics(image, version, FIRST_TOPIC_ID_OFFSET_FETCH_VERSION, topics)
    named = {name for _, name in resolved or () if name is not None}
    hidden = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, named) if resolved is not None else set()
    wanted = None if resolved is None else [
        (name, i) for t, (_, name) in zip(topics, resolved, strict=True)
        if name is not None and name not in hidden for i in t.partition_indexes]
    code, offsets = ctx.groups.fetch_offsets(group_id, wanted, member_id, member_epoch)
    if code:
        return code, []
    if wanted is None:  # every topic the group committed, less those the caller may not see
        hidden = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, {name for name, _ in offsets},
                                          log_denied=False)
        offsets = {tp: c for tp, c in offsets.items() if tp[0] not in hidden}
    # v7+ `require_stable` (read_committed consumers): a partition with a transactional commit
    # still pending answers UNSTABLE_OFFSET_COMMIT (88), which the client retries (KIP-447).
    unstable = frozenset()
    if version >= 7 and require_stable:
        unstable = frozenset(tp for tp in offsets if ctx.groups.txn_offset_pending(group_id, tp))
    answered: dict[object, list[dict]] = {}
    for (name, index), committed in offsets.items():
        key = _topic_key(version, FIRST_TOPIC_ID_OFFSET_FETCH_VERSION, image, name)
        if key is None:  # v10: a topic that has no id any more cannot be named
            continue
        answered.setdefault(key, []).append(
            _offset_partition(index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if (name, index) in unstable
            else _offset_partition(index, committed))
    result = list(answered.items())
    for t, (key, requested) in zip(topics or (), resolved or (), strict=True):
        error = (ErrorCode.UNKNOWN_TOPIC_ID if requested is None
                 else ErrorCode.TOPIC_AUTHORIZATION_FAILED if requested in hidden else 0)
        if error:
            result.append((key, [_offset_partition(i, None, error) for i in t.partition_indexes]))
    return 0, result


async def handle_offset_fetch(ctx: BrokerContext, header, request, conn=None) -> OffsetFetchResponse:
    """v8+ fetch a batch of groups, each answered on its own (Kafka's KafkaApis); v9 names
    the member and its epoch (checked in a consumer-protocol group), v10 topics by id."""
    version = header.api_version
    if version >= FIRST_BATCHED_OFFSET_FETCH_VERSION:
        name_field = "topic_id" if version >= FIRST_TOPIC_ID_OFFSET_FETCH_VERSION else "name"
        groups = []
        for g in request.groups:
            code, topics = _fetch_group(ctx, conn, version, g.group_id, g.topics, g.member_id,
                                        g.member_epoch, request.require_stable)
            groups.append({"group_id": g.group_id, "error_code": code, "topics": [
                {name_field: key, "partitions": parts} for key, parts in topics]})
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    # v1-7: one group. A group-level error leaves the named partitions at -1 (v0-1 carry it
    # on each partition: no top-level code).
    code, topics = _fetch_group(ctx, conn, version, request.group_id, request.topics, None, -1,
                                version >= 7 and request.require_stable)
    if code and request.topics is not None:
        topics = [(t.name, [_offset_partition(i, None) for i in t.partition_indexes]) for t in request.topics]
    if version < 2:
        for _, parts in topics:
            for part in parts:
                part["error_code"] = part["error_code"] or code
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
        {"name": key, "partitions": parts} for key, parts in topics])


# DescribeGroups' first version that answers GROUP_ID_NOT_FOUND for an unknown group (KIP-1043).
FIRST_GROUP_NOT_FOUND_VERSION = 6


async def handle_describe_groups(ctx: BrokerContext, header, request, conn=None) -> DescribeGroupsResponse:
    """An unknown (or deleted) group is state Dead; from v6 also GROUP_ID_NOT_FOUND with
    Kafka's message (GroupMetadataManager.describeGroups)."""
    described = []
    wanted = bool(getattr(request, "include_authorized_operations", False))
    for group_id in request.groups:
        code, group = (acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, group_id), None)
        if not code:
            code, group = ctx.groups.describe(group_id)
        if group is None or group.phase is GroupPhase.DEAD:
            message = None
            if code == 0 and header.api_version >= FIRST_GROUP_NOT_FOUND_VERSION:
                code, message = ErrorCode.GROUP_ID_NOT_FOUND, (
                    f"Group {group_id} is not a classic group." if ctx.groups.other_group_type(group_id, "classic")
                    else f"Group {group_id} not found.")
            described.append({"error_code": code, "error_message": message, "group_id": group_id,
                              "group_state": GroupPhase.DEAD.value if code in (0, ErrorCode.GROUP_ID_NOT_FOUND)
                              else "",
                              "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        stable = group.phase is GroupPhase.STABLE
        described.append({
            "error_code": 0, "group_id": group_id, "group_state": group.phase.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata_for(group.protocol_name),
                         "member_assignment": m.assignment if stable else b""}
                        for m in group.members.values()],
            "authorized_operations": authz.authorized_operations(ctx, conn, authz.GROUP, group_id, wanted),
        })
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"  # KIP-848 (broker/group/consumer_group_state.py)
GROUP_TYPE_SHARE = "share"  # KIP-932 (broker/group/share_group_state.py)


async def handle_list_groups(ctx: BrokerContext, header, request, conn=None) -> ListGroupsResponse:
    """v4+: each group's state, filtered by `states_filter`; v5+: its type ("classic",
    "consumer" or "share"), filtered by `types_filter`. Filters match case-insensitively, as in Kafka."""
    states = {s.lower() for s in (getattr(request, "states_filter", None) or [])}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or [])}
    groups = []
    listed = [(g.group_id, g.protocol_type or "", g.phase.value, GROUP_TYPE_CLASSIC)
              for g in ctx.groups.list_groups()]
    listed += [(g.group_id, "consumer", g.describe_state(), GROUP_TYPE_CONSUMER)
               for g in ctx.groups.list_consumer_groups()]
    listed += [(g.group_id, "share", g.state, GROUP_TYPE_SHARE) for g in ctx.groups.share.listed()]
    visible = acl_checks.visible_groups(ctx, conn, (group_id for group_id, *_ in listed))
    for group_id, protocol_type, state, group_type in listed:
        if group_id not in visible:
            continue
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        groups.append({"group_id": group_id, "protocol_type": protocol_type,
                       "group_state": state, "group_type": group_type})
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)


async def handle_offset_delete(ctx: BrokerContext, header, request, conn=None):
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    denied_group = acl_checks.group_error(ctx, conn, AclOperation.DELETE, request.group_id)
    if denied_group:  # Kafka: DELETE on the group, then READ on each topic
        return OffsetDeleteResponse(error_code=denied_group, throttle_time_ms=0, topics=[])
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, {name for name, _ in asked})
    code, codes = await ctx.groups.delete_offsets(request.group_id, [k for k in asked if k[0] not in denied])
    codes = {**codes, **{k: ErrorCode.TOPIC_AUTHORIZATION_FAILED for k in asked if k[0] in denied}}
    topics: dict[str, list[dict]] = {}
    if code == 0:
        for (name, index), partition_code in codes.items():
            topics.setdefault(name, []).append({"partition_index": index, "error_code": partition_code})
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


async def handle_delete_groups(ctx: BrokerContext, header, request, conn=None) -> DeleteGroupsResponse:
    """One result per group id (a repeated id is answered once, as Kafka's keyed collection does).
    v3's per-group error message stays null: Kafka 4.4 fills it only from an exception with
    text of its own (a streams group's topology cleanup), never for the outcomes raftka has."""
    async def delete(group_id: str) -> int:
        if group_id in ctx.groups.share.groups:  # its share state goes with it (Persister.delete)
            return await ctx.groups.share.delete(group_id, ctx.persister)
        return await ctx.groups.delete_group(group_id)

    results = [{"group_id": g, "error_code": acl_checks.group_error(ctx, conn, AclOperation.DELETE, g)
                or await delete(g)} for g in dict.fromkeys(request.groups_names)]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
