"""KIP-848's APIs, ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): request
translation around `ctx.groups` (broker/group/group_coordinator.py), whose core
(broker/group/consumer_group_state.py) makes every decision."""

from __future__ import annotations

import uuid

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.group.consumer_group_state import Heartbeat, Partitions
from raftka.broker.handlers.groups import _peer_host
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

ConsumerGroupHeartbeatResponse = response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
ConsumerGroupDescribeResponse = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE)

MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # ConsumerGroupDescribe v1: -1 unknown, 0 classic, 1 consumer


def _owned(rows) -> Partitions | None:
    if rows is None:
        return None
    return {str(r.topic_id): frozenset(r.partitions) for r in rows}


def _wire(partitions: Partitions) -> list[dict]:
    return [{"topic_id": uuid.UUID(t), "partitions": sorted(ps)} for t, ps in sorted(partitions.items())]


async def handle_heartbeat(ctx: BrokerContext, header, request, conn=None):
    def answer(code: int, message: str | None = None, **fields):
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                              **{"member_id": None, "member_epoch": 0,
                                                 "heartbeat_interval_ms": 0, "assignment": None, **fields})

    # Kafka: READ on the group, then DESCRIBE on every topic the member subscribes to.
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return answer(denied)
    if request.subscribed_topic_names and acl_checks.topics_denied(
            ctx, conn, AclOperation.DESCRIBE, request.subscribed_topic_names):
        return answer(int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    # v1+: the regex the coordinator resolves (librdkafka sends "" for none: an empty regex clears it).
    regex = request.subscribed_topic_regex if header.api_version >= 1 else None
    topics = request.subscribed_topic_names
    hb = Heartbeat(
        member_id=request.member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=tuple(topics) if topics is not None else None,
        server_assignor=request.server_assignor, owned=_owned(request.topic_partitions),
        client_id=header.client_id or "", client_host=_peer_host(conn), subscribed_topic_regex=regex,
        may_describe=(lambda name: not acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, [name],
                                                                log_denied=False))
        if acl_checks.enabled(ctx) else None)
    result = await ctx.groups.consumer_heartbeat(request.group_id, hb, server_member_ids=header.api_version == 0)
    if result.error_code:
        return answer(result.error_code, result.error_message)
    assignment = None if result.assignment is None else {"topic_partitions": _wire(result.assignment)}
    return answer(0, member_id=result.member_id, member_epoch=result.member_epoch,
                  heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


async def handle_describe(ctx: BrokerContext, header, request, conn=None):
    wanted = bool(request.include_authorized_operations)
    image = ctx.image
    names = {t.topic_id: t.name for t in image.topics.values()}

    def assignment(partitions: Partitions) -> dict:
        return {"topic_partitions": [
            {"topic_id": uuid.UUID(t), "topic_name": names.get(t, ""), "partitions": sorted(ps)}
            for t, ps in sorted(partitions.items())]}

    described = []
    for group_id in request.group_ids:
        code = acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, group_id)
        message, group = None, None
        if not code:
            code, message, group = ctx.groups.consumer_describe(group_id)
        if group is None:
            described.append({"error_code": code, "error_message": message, "group_id": group_id,
                              "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                              "assignor_name": "", "members": []})
            continue
        described.append({
            "error_code": 0, "error_message": None, "group_id": group_id, "group_state": group.describe_state(),
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor(),
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.metadata.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.metadata.client_id,
                "client_host": m.metadata.client_host,
                "subscribed_topic_names": list(m.metadata.subscribed_topic_names),
                # Kafka's member without a regex has "" (ConsumerGroupMember's default), not null.
                "subscribed_topic_regex": m.metadata.subscribed_topic_regex or "",
                "assignment": assignment(m.assignment.assigned),
                "target_assignment": assignment(group.target.get(m.member_id, {})),
                "member_type": MEMBER_TYPE_CLASSIC if m.uses_classic else MEMBER_TYPE_CONSUMER,
            } for m in sorted(group.members.values(), key=lambda m: m.member_id)],
            "authorized_operations": authz.authorized_operations(ctx, conn, authz.GROUP, group_id, wanted),
        })
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=described)
