"""KIP-932's group APIs, ShareGroupHeartbeat (76) and ShareGroupDescribe (77): request
translation around `ctx.groups.share` (broker/group/share_group_coordinator.py), whose
core (broker/group/share_group_state.py) makes every membership decision."""

from __future__ import annotations

import uuid

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.group.group_timers import now_ms
from raftka.broker.group.share_assignor import TopicPartition
from raftka.broker.group.share_group_state import ASSIGNOR_NAME, Heartbeat
from raftka.broker.handlers.groups import _peer_host
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

ShareGroupHeartbeatResponse = response_class(ApiKey.SHARE_GROUP_HEARTBEAT)
ShareGroupDescribeResponse = response_class(ApiKey.SHARE_GROUP_DESCRIBE)


def _by_topic(tps: frozenset[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        out.setdefault(topic, []).append(partition)
    return out


async def handle_heartbeat(ctx: BrokerContext, header, request, conn=None):
    def answer(code: int, message: str | None = None, **fields):
        return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                           **{"member_id": None, "member_epoch": 0,
                                              "heartbeat_interval_ms": 0, "assignment": None, **fields})

    # Kafka: READ on the group, then DESCRIBE on every topic the member subscribes to.
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return answer(denied)
    if request.subscribed_topic_names and acl_checks.topics_denied(
            ctx, conn, AclOperation.DESCRIBE, request.subscribed_topic_names):
        return answer(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    topics = request.subscribed_topic_names
    hb = Heartbeat(request.member_id, request.member_epoch,
                   tuple(topics) if topics is not None else None, request.rack_id,
                   client_id=header.client_id or "", client_host=_peer_host(conn))
    result = await ctx.groups.share.heartbeat(request.group_id, hb, ctx.share_persister, now_ms())
    if result.error:
        return answer(result.error, result.message or None)
    assignment = None
    if result.assignment is not None:
        ids = {t.name: t.topic_id for t in ctx.image.topics.values()}
        assignment = {"topic_partitions": [{"topic_id": uuid.UUID(str(ids[t])), "partitions": ps}
                                           for t, ps in _by_topic(result.assignment).items() if t in ids]}
    return answer(0, member_id=result.member_id, member_epoch=result.member_epoch,
                  heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


async def handle_describe(ctx: BrokerContext, header, request, conn=None):
    wanted = bool(request.include_authorized_operations)
    ids = {t.name: t.topic_id for t in ctx.image.topics.values()}

    def assignment(tps: frozenset[TopicPartition]) -> dict:
        return {"topic_partitions": [
            {"topic_id": uuid.UUID(str(ids[t])), "topic_name": t, "partitions": ps}
            for t, ps in _by_topic(tps).items() if t in ids]}

    described = []
    for group_id in request.group_ids:
        code = acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, group_id)
        message, group = None, None
        if not code:
            code, message, group = ctx.groups.share.describe(group_id)
        if group is None:
            described.append({"error_code": code, "error_message": message, "group_id": group_id,
                              "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                              "assignor_name": "", "members": []})
            continue
        described.append({
            "error_code": 0, "error_message": None, "group_id": group_id, "group_state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": ASSIGNOR_NAME,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_topic_names),
                "assignment": assignment(m.assignment),
            } for m in sorted(group.members.values(), key=lambda m: m.member_id)],
            "authorized_operations": authz.authorized_operations(ctx, conn, authz.GROUP, group_id, wanted),
        })
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=described)
