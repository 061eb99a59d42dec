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


async def handle_offset_commit(ctx: BrokerContext, header, request, conn=None) -> OffsetCommitResponse:
    now = int(time.time() * 1000)
    offsets = {}
    unknown: dict[tuple[str, int], int] = {}
    image = ctx.image
    for t in request.topics:
        topic = image.topic_by_name(t.name)
        for p in t.partitions:
            if topic is None or p.partition_index not in topic.partitions:
                # Kafka's rule: a partition the metadata does not know is answered, not stored.
                unknown[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            # v1 carries the commit's timestamp; -1 (and every other version) means now.
            stamp = p.commit_timestamp if header.api_version == 1 and p.commit_timestamp >= 0 else now
            offsets[(t.name, p.partition_index)] = CommittedOffset(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", stamp)
    # READ on the group (else every partition fails with 30), then READ on each topic (29).
    group_denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, (t.name for t in request.topics))
    if group_denied:  # nothing about the topics is revealed to a caller not allowed the group
        refused = dict.fromkeys([*offsets, *unknown], group_denied)
        unknown = {}
    else:  # a topic the caller may not READ is refused whether it exists or not
        refused = {key: ErrorCode.TOPIC_AUTHORIZATION_FAILED for key in [*offsets, *unknown] if key[0] in denied}
        unknown = {key: code for key, code in unknown.items() if key not in refused}
    remaining = {k: v for k, v in offsets.items() if k not in refused}
    codes = {}
    if remaining or not (refused or unknown):
        codes = await ctx.groups.commit(request.group_id, request.member_id,
                                        request.generation_id_or_member_epoch, remaining, request.group_instance_id,
                                        api_version=header.api_version)
    codes = {**codes, **refused, **unknown}
    topics: dict[str, list[dict]] = {}
    for (name, index), code in codes.items():
        topics.setdefault(name, []).append({"partition_index": index, "error_code": code})
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


async def handle_offset_fetch(ctx: BrokerContext, header, request, conn=None) -> OffsetFetchResponse:
    wanted = None if request.topics is None else [
        (t.name, i) for t in request.topics for i in t.partition_indexes]
    # DESCRIBE on the group, then on each topic: a named partition of a topic the caller may
    # not DESCRIBE answers 29 with offset -1; the all-partitions form leaves it out.
    code = acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, request.group_id)
    if code:
        offsets = dict.fromkeys(wanted or (), None)
    else:
        code, offsets = ctx.groups.fetch_offsets(request.group_id, wanted)
    hidden = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, {name for name, _ in offsets},
                                      log_denied=wanted is not None)
    # v7+ `require_stable` (read_committed consumers): a partition with a transactional commit
    # still pending answers UNSTABLE_OFFSET_COMMIT (88), which the client retries (KIP-447).
    unstable = frozenset()
    if header.api_version >= 7 and request.require_stable and not code:
        unstable = frozenset(tp for tp in offsets if ctx.groups.txn_offset_pending(request.group_id, tp))
    topics: dict[str, list[dict]] = {}
    for (name, index), committed in offsets.items():
        if name in hidden:
            if wanted is None:
                continue
            committed = None
        elif (name, index) in unstable:
            committed = None
        topics.setdefault(name, []).append({
            "partition_index": index,
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in hidden and not code
            else ErrorCode.UNSTABLE_OFFSET_COMMIT if (name, index) in unstable
            else code if header.api_version < 2 else 0,
        })
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


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
                    f"Group {group_id} is not a classic group." if group_id in ctx.groups.share.groups
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
