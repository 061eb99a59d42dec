"""The group APIs: FindCoordinator, Join/Sync/Heartbeat/LeaveGroup, OffsetCommit/Fetch,
DescribeGroups, ListGroups, DeleteGroups — request translation around `ctx.groups`
(broker/group_coordinator.py), where the decisions are made."""

from __future__ import annotations

import time

import structlog

from raftka.broker import authorized_operations as authz
from raftka.broker.errors import error_code_for
from raftka.broker.group_coordinator import OFFSETS_TOPIC, CoordinatorError
from raftka.broker.group_state import CommittedOffset, GroupPhase
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

log = structlog.get_logger("broker.groups")

OffsetDeleteResponse = response_class(ApiKey.OFFSET_DELETE)

KEY_TYPE_GROUP = 0
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _peer_host(conn) -> str:
    """Kafka shows a member's host as "/<ip>"."""
    peer = conn.peer if conn is not None else ""
    return "/" + peer.rsplit(":", 1)[0] if peer else ""


async def handle_find_coordinator(ctx, header, request, conn=None) -> FindCoordinatorResponse:
    def fail(code: int, message: str) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                       node_id=-1, host="", port=-1)

    if request.key_type != KEY_TYPE_GROUP:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"key_type {request.key_type} (transactions) is not supported; expected 0 (group)")
    if not request.key:
        return fail(ErrorCode.INVALID_REQUEST, "the group id is empty; expected a non-empty string")
    groups = ctx.groups
    try:
        await groups.ensure_offsets_topic()
    except Exception as exc:
        code = error_code_for(exc)
        if code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {OFFSETS_TOPIC}: {exc}")
    try:
        index = groups.partition_for(request.key)
    except CoordinatorError as exc:
        return fail(exc.code, str(exc))
    image = ctx.image
    topic = image.topic_by_name(OFFSETS_TOPIC)
    part = topic.partitions.get(index) if topic is not None else None
    if part is None or part.leader < 0 or not image.is_live(part.leader):
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{index} has no live leader")
    broker = image.brokers.get(part.leader)
    listener = conn.listener if conn is not None else None
    endpoint = broker.listener(listener) if (broker is not None and listener) else None
    if endpoint is None and broker is not None and broker.listeners:
        endpoint = (broker.listeners[0][1], broker.listeners[0][2])
    if endpoint is None:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {part.leader} has no endpoint")
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                   node_id=part.leader, host=endpoint[0], port=endpoint[1])


async def handle_join_group(ctx, header, request, conn=None) -> JoinGroupResponse:
    result = await ctx.groups.join(
        request.group_id, request.member_id, client_id=header.client_id or "",
        client_host=_peer_host(conn), session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=header.api_version >= 4, group_instance_id=request.group_instance_id)
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_name=result.protocol_name or "", leader=result.leader, member_id=result.member_id,
        members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                 for m in result.members])


async def handle_sync_group(ctx, header, request, conn=None) -> SyncGroupResponse:
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await ctx.groups.sync(request.group_id, request.member_id, request.generation_id, assignments,
                                   request.group_instance_id)
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code, assignment=result.assignment)


async def handle_heartbeat(ctx, header, request, conn=None) -> HeartbeatResponse:
    code = ctx.groups.heartbeat(request.group_id, request.member_id, request.generation_id,
                                request.group_instance_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx, header, request, conn=None) -> LeaveGroupResponse:
    if header.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    top, codes = ctx.groups.leave(request.group_id, members)
    if header.api_version >= 3:
        top = top if top in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                             ErrorCode.COORDINATOR_NOT_AVAILABLE) else 0
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=[
        {"member_id": m, "group_instance_id": i, "error_code": c} for (m, i), c in zip(members, codes, strict=True)])


async def handle_offset_commit(ctx, header, request, conn=None) -> OffsetCommitResponse:
    now = int(time.time() * 1000)
    offsets = {}
    for t in request.topics:
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = CommittedOffset(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now)
    codes = await ctx.groups.commit(request.group_id, request.member_id,
                                    request.generation_id_or_member_epoch, offsets, request.group_instance_id)
    topics: dict[str, list[dict]] = {}
    for (name, index), code in codes.items():
        topics.setdefault(name, []).append({"partition_index": index, "error_code": code})
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


async def handle_offset_fetch(ctx, header, request, conn=None) -> OffsetFetchResponse:
    wanted = None if request.topics is None else [
        (t.name, i) for t in request.topics for i in t.partition_indexes]
    code, offsets = ctx.groups.fetch_offsets(request.group_id, wanted)
    topics: dict[str, list[dict]] = {}
    for (name, index), committed in offsets.items():
        topics.setdefault(name, []).append({
            "partition_index": index,
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": code if header.api_version < 2 else 0,
        })
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


async def handle_describe_groups(ctx, header, request, conn=None) -> DescribeGroupsResponse:
    described = []
    wanted = bool(getattr(request, "include_authorized_operations", False))
    for group_id in request.groups:
        code, group = ctx.groups.describe(group_id)
        if group is None:
            described.append({"error_code": code, "group_id": group_id,
                              "group_state": GroupPhase.DEAD.value if code == 0 else "",
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


GROUP_TYPE_CLASSIC = "classic"  # every raftka group runs the classic protocol (KIP-848's is not served)


async def handle_list_groups(ctx, header, request, conn=None) -> ListGroupsResponse:
    """v4+: each group's state, filtered by `states_filter`; v5+: its type ("classic"),
    filtered by `types_filter`. Filters match case-insensitively, as in Kafka."""
    states = {s.lower() for s in (getattr(request, "states_filter", None) or [])}
    types = {t.lower() for t in (getattr(request, "types_filter", None) or [])}
    groups = []
    for g in ctx.groups.list_groups():
        if states and g.phase.value.lower() not in states:
            continue
        if types and GROUP_TYPE_CLASSIC not in types:
            continue
        groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                       "group_state": g.phase.value, "group_type": GROUP_TYPE_CLASSIC})
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)


async def handle_offset_delete(ctx, header, request, conn=None):
    asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    code, codes = await ctx.groups.delete_offsets(request.group_id, asked)
    topics: dict[str, list[dict]] = {}
    if code == 0:
        for (name, index), partition_code in codes.items():
            topics.setdefault(name, []).append({"partition_index": index, "error_code": partition_code})
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])


async def handle_delete_groups(ctx, header, request, conn=None) -> DeleteGroupsResponse:
    results = [{"group_id": g, "error_code": await ctx.groups.delete_group(g)} for g in request.groups_names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
