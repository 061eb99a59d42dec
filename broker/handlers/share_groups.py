"""KIP-932's group APIs, ShareGroupHeartbeat (76) and ShareGroupDescribe (77): request
translation around `ctx.groups.share` (broker/group/share_group_coordinator.py), whose
core (broker/group/share_group_state.py) makes every membership decision."""

from __future__ import annotations

import uuid

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.group.group_timers import now_ms
from raftka.broker.group.share_assignor import TopicPartition
from raftka.broker.group.share_group_state import ASSIGNOR_NAME, Heartbeat
from raftka.broker.group.share_persister import lag_wanted, share_lag
from raftka.broker.group.share_state_persister import ShareStatePersister
from raftka.broker.handlers.groups import _peer_host
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.share_groups")

ShareGroupHeartbeatResponse = response_class(ApiKey.SHARE_GROUP_HEARTBEAT)
LATEST = -1  # ListOffsets' timestamp for the high watermark (read_uncommitted)
LIST_OFFSETS_VERSION = 7
END_OFFSET_TIMEOUT_S = 5.0
LEADER_NOT_AVAILABLE = int(ErrorCode.LEADER_NOT_AVAILABLE)
NETWORK_EXCEPTION = int(ErrorCode.NETWORK_EXCEPTION)
REQUEST_TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
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
    result = await ctx.groups.share.heartbeat(request.group_id, hb, ctx.persister, now_ms())
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


DescribeShareGroupOffsetsResponse = response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
AlterShareGroupOffsetsResponse = response_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
DeleteShareGroupOffsetsResponse = response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
NIL_UUID = uuid.UUID(int=0)


def _topic_id(ctx: BrokerContext, name: str) -> uuid.UUID:
    topic = ctx.image.topic_by_name(name)
    return uuid.UUID(str(topic.topic_id)) if topic is not None else NIL_UUID


async def handle_describe_offsets(ctx: BrokerContext, header, request, conn=None):
    """DescribeShareGroupOffsets (90) v0-1: DESCRIBE on the group, then on each topic, as Kafka.
    v1's Lag: the high watermark minus the start offset minus the delivery complete count
    (`share_lag`), -1 where either is unknown."""
    groups = []
    for asked in request.groups:
        denied = acl_checks.group_error(ctx, conn, AclOperation.DESCRIBE, asked.group_id)
        if denied:
            groups.append({"group_id": asked.group_id, "topics": [], "error_code": denied, "error_message": None})
            continue
        wanted = None if asked.topics is None else {t.topic_name: list(t.partitions) for t in asked.topics}
        refused: frozenset[str] = frozenset()
        if wanted:
            refused = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, list(wanted))
            wanted = {t: ps for t, ps in wanted.items() if t not in refused}
        code, message, described = await ctx.groups.share.describe_offsets(asked.group_id, wanted, ctx.persister)
        if code:
            groups.append({"group_id": asked.group_id, "topics": [], "error_code": code, "error_message": message})
            continue
        lagging = [(t, p) for t, rows in described.items() for p, (start, _, err, _, complete) in rows.items()
                   if not err and lag_wanted(start, complete)] if header.api_version >= 1 else []
        ends = await _end_offsets(ctx, lagging) if lagging else {}
        topics = [{"topic_name": t, "topic_id": _topic_id(ctx, t),
                   "partitions": [_offsets_row(p, *fields, ends.get((t, p))) for p, fields in sorted(rows.items())]}
                  for t, rows in described.items()]
        topics += [{"topic_name": t, "topic_id": NIL_UUID, "partitions": [
            {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
             "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None}
            for p in next(x.partitions for x in asked.topics if x.topic_name == t)]} for t in sorted(refused)]
        groups.append({"group_id": asked.group_id, "topics": topics, "error_code": 0, "error_message": None})
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


def _offsets_row(p: int, start: int, epoch: int, err: int, msg: str | None, complete: int,
                 end: int | tuple[int, str] | None) -> dict:
    if isinstance(end, tuple):  # Kafka: the end offset's error, in place of the offsets
        return {"partition_index": p, "start_offset": 0, "leader_epoch": 0, "lag": -1,
                "error_code": end[0], "error_message": end[1]}
    return {"partition_index": p, "start_offset": start, "leader_epoch": epoch,
            "lag": -1 if end is None else share_lag(start, complete, end), "error_code": err, "error_message": msg}


async def _end_offsets(ctx: BrokerContext, keys: list[tuple[str, int]],
                       ) -> dict[tuple[str, int], int | tuple[int, str]]:
    """The end offsets (high watermarks) of `keys`, or the error that stood in the way (Kafka's
    `PartitionMetadataClient.listLatestOffsets`): a partition this broker leads from its log,
    the others with ListOffsets (LATEST) to their leaders over the share persister's peer
    connections, within END_OFFSET_TIMEOUT_S."""
    out: dict[tuple[str, int], int | tuple[int, str]] = {}
    remote: dict[int, list[tuple[str, int]]] = {}
    persister = ctx.share_persister
    for topic, index in keys:
        partition = ctx.replicas.partitions.get((topic, index))
        if partition is not None and partition.is_leader:
            out[(topic, index)] = partition.high_watermark
            continue
        image = ctx.image.topic_by_name(topic)
        part = image.partitions.get(index) if image is not None else None
        if part is None or part.leader < 0 or part.leader == ctx.config.node_id \
                or not isinstance(persister, ShareStatePersister):
            out[(topic, index)] = (LEADER_NOT_AVAILABLE, f"{topic}-{index} has no leader to ask for its end offset")
        else:
            remote.setdefault(part.leader, []).append((topic, index))
    if not remote or not isinstance(persister, ShareStatePersister):
        return out
    route = persister.route

    async def ask(node: int, wanted: list[tuple[str, int]]) -> None:
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": LATEST}
                                       for p in ps]} for t, ps in _by_topic(frozenset(wanted)).items()]}
        try:
            conn = await route.connection(node)
            if conn is None:
                raise ConnectionError(f"broker {node} has no endpoint")
            response = await conn.request(ApiKey.LIST_OFFSETS, body, version=LIST_OFFSETS_VERSION)
        except Exception as exc:  # refused, lost, timed out, malformed
            log.info("share_groups.end_offset_failed", broker=node, error=str(exc))
            await route.drop(node)
            out.update(dict.fromkeys(wanted, (NETWORK_EXCEPTION, f"asking broker {node} for end offsets: {exc}")))
            return
        asked = set(wanted)
        for topic in response.topics if response is not None else ():
            for p in topic.partitions:
                if (topic.name, p.partition_index) in asked:
                    out[(topic.name, p.partition_index)] = (
                        (p.error_code, ErrorCode(p.error_code).name) if p.error_code else p.offset)

    with trio.move_on_after(END_OFFSET_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            for node, wanted in remote.items():
                nursery.start_soon(ask, node, wanted)
    for key in keys:
        out.setdefault(key, (REQUEST_TIMED_OUT, f"no end offset for {key[0]}-{key[1]} within "
                                                f"{END_OFFSET_TIMEOUT_S:g} s"))
    return out


async def handle_alter_offsets(ctx: BrokerContext, header, request, conn=None):
    """AlterShareGroupOffsets (91) v0: READ on the group, then on each topic; only an empty
    share group (NON_EMPTY_GROUP otherwise)."""
    def answer(code: int, message: str | None, responses: list) -> object:
        return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                              responses=responses)

    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return answer(denied, None, [])
    asked = {t.topic_name: {p.partition_index: p.start_offset for p in t.partitions} for t in request.topics}
    refused = acl_checks.topics_denied(ctx, conn, AclOperation.READ, list(asked)) if asked else set()
    code, message, altered = await ctx.groups.share.alter_offsets(
        request.group_id, {t: ps for t, ps in asked.items() if t not in refused}, ctx.persister)
    if code:
        return answer(code, message, [])
    altered = {**altered, **{t: dict.fromkeys(asked[t], (TOPIC_AUTHORIZATION_FAILED, None)) for t in refused}}
    return answer(0, None, [{"topic_name": t, "topic_id": _topic_id(ctx, t), "partitions": [
        {"partition_index": p, "error_code": err, "error_message": msg} for p, (err, msg) in sorted(rows.items())]}
        for t, rows in altered.items()])


async def handle_delete_offsets(ctx: BrokerContext, header, request, conn=None):
    """DeleteShareGroupOffsets (92) v0: DELETE on the group, READ on each topic; only an empty
    share group (NON_EMPTY_GROUP otherwise)."""
    def answer(code: int, message: str | None, responses: list) -> object:
        return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                               responses=responses)

    denied = acl_checks.group_error(ctx, conn, AclOperation.DELETE, request.group_id)
    if denied:
        return answer(denied, None, [])
    asked = [t.topic_name for t in request.topics]
    refused = acl_checks.topics_denied(ctx, conn, AclOperation.READ, asked) if asked else set()
    code, message, deleted = await ctx.groups.share.delete_offsets(
        request.group_id, [t for t in asked if t not in refused], ctx.persister)
    if code:
        return answer(code, message, [])
    deleted = {**deleted, **dict.fromkeys(refused, (TOPIC_AUTHORIZATION_FAILED, None))}
    return answer(0, None, [{"topic_name": t, "topic_id": _topic_id(ctx, t), "error_code": err, "error_message": msg}
                            for t, (err, msg) in deleted.items()])
