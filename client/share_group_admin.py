"""Share-group administration over a Cluster (KIP-932): list, describe (members, state, start
offsets and lag), alter and delete start offsets, delete. What `raftka share-groups` and
AsyncAdmin's share-group calls use; Kafka's Admin does the same with ListGroups (type filter
"share"), ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups, each sent to the group's coordinator.

A share group's "offset" per partition is its start offset: everything before it is settled
(accepted, rejected or archived); -1 while the group has not started reading the partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, error_for_code
from raftka.client.group_admin import delete_group
from raftka.client.group_membership import GroupMembership
from raftka.client.protocol import ApiKey, ErrorCode, ListGroupsRequest, request_class
from raftka.client.records import TopicPartition

SHARE_GROUP_TYPE = "share"


@dataclass(frozen=True)
class ShareMemberView:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator_id: int
    members: tuple[ShareMemberView, ...]


@dataclass(frozen=True)
class ShareOffset:
    tp: TopicPartition
    start_offset: int  # -1: not initialized
    leader_epoch: int
    lag: int  # -1: unknown


def _coordinator(cluster: Cluster, group_id: str) -> GroupMembership:
    return GroupMembership(cluster, group_id, request_timeout_ms=int(cluster.request_timeout * 1000))


async def list_share_groups(cluster: Cluster) -> list[tuple[str, str]]:
    """(group id, state) of every share group on every broker (each answers for its own)."""
    metadata = await cluster.refresh_metadata()
    out: dict[str, str] = {}
    for node_id in metadata.brokers:
        try:
            response = await cluster.send_to(node_id, ApiKey.LIST_GROUPS, ListGroupsRequest(
                states_filter=[], types_filter=[SHARE_GROUP_TYPE]))
        except KafkaConnectionError:
            continue
        if response.error_code:
            raise error_for_code(response.error_code, f"ListGroups from broker {node_id}")
        for g in response.groups:
            out[g.group_id] = g.group_state or ""
    return sorted(out.items())


async def describe_share_group(cluster: Cluster, group_id: str) -> ShareGroupView:
    """ShareGroupDescribe; GroupIdNotFoundError when `group_id` is not a share group."""
    coordinator = _coordinator(cluster, group_id)
    response = await coordinator._send(ApiKey.SHARE_GROUP_DESCRIBE, request_class(ApiKey.SHARE_GROUP_DESCRIBE)(
        group_ids=[group_id], include_authorized_operations=False))
    (g,) = response.groups
    if g.error_code:
        raise error_for_code(g.error_code, f"ShareGroupDescribe {group_id!r}: "
                             f"{g.error_message or ErrorCode(g.error_code).name}")
    members = tuple(ShareMemberView(
        m.member_id, m.client_id, m.client_host, m.member_epoch, tuple(m.subscribed_topic_names),
        tuple(sorted(TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions)))
        for m in g.members)
    assert coordinator.coordinator_id is not None
    return ShareGroupView(group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                          coordinator.coordinator_id, members)


async def describe_share_group_offsets(cluster: Cluster, group_id: str,
                                       topics: Mapping[str, Iterable[int]] | None = None) -> list[ShareOffset]:
    """The group's start offset and lag per partition (of `topics`, or of every partition it has)."""
    request = request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)(groups=[{
        "group_id": group_id,
        "topics": None if topics is None else [{"topic_name": t, "partitions": sorted(ps)} for t, ps in topics.items()]}])
    response = await _coordinator(cluster, group_id)._send(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request)
    (g,) = response.groups
    if g.error_code:
        raise error_for_code(g.error_code, f"DescribeShareGroupOffsets {group_id!r}: "
                             f"{g.error_message or ErrorCode(g.error_code).name}")
    out = []
    for t in g.topics:
        for p in t.partitions:
            if p.error_code:
                raise error_for_code(p.error_code, f"DescribeShareGroupOffsets {group_id!r} "
                                     f"{t.topic_name}/{p.partition_index}: {p.error_message or ''}".rstrip(": "))
            out.append(ShareOffset(TopicPartition(t.topic_name, p.partition_index), p.start_offset,
                                   p.leader_epoch, p.lag))
    return sorted(out, key=lambda o: o.tp)


async def alter_share_group_offsets(cluster: Cluster, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Set the group's start offsets (the group must have no members: GroupNotEmptyError)."""
    by_topic: dict[str, list[dict]] = {}
    for tp, offset in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "start_offset": offset})
    request = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)(
        group_id=group_id, topics=[{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()])
    response = await _coordinator(cluster, group_id)._send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request)
    if response.error_code:
        raise error_for_code(response.error_code, f"AlterShareGroupOffsets {group_id!r}: "
                             f"{response.error_message or ErrorCode(response.error_code).name}")
    for t in response.responses:
        for p in t.partitions:
            if p.error_code:
                raise error_for_code(p.error_code, f"AlterShareGroupOffsets {group_id!r} "
                                     f"{t.topic_name}/{p.partition_index}: {p.error_message or ''}".rstrip(": "))


async def delete_share_group_offsets(cluster: Cluster, group_id: str, topics: Iterable[str]) -> None:
    """Forget the group's state for `topics` (the group must have no members)."""
    request = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)(
        group_id=group_id, topics=[{"topic_name": t} for t in dict.fromkeys(topics)])
    response = await _coordinator(cluster, group_id)._send(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request)
    if response.error_code:
        raise error_for_code(response.error_code, f"DeleteShareGroupOffsets {group_id!r}: "
                             f"{response.error_message or ErrorCode(response.error_code).name}")
    for t in response.responses:
        if t.error_code:
            raise error_for_code(t.error_code, f"DeleteShareGroupOffsets {group_id!r} {t.topic_name}: "
                                 f"{t.error_message or ''}".rstrip(": "))


async def delete_share_group(cluster: Cluster, group_id: str) -> None:
    """Delete an empty share group and its state (DeleteGroups, as for any group)."""
    await delete_group(cluster, group_id)


__all__ = ["ShareGroupView", "ShareMemberView", "ShareOffset", "alter_share_group_offsets", "delete_share_group",
           "delete_share_group_offsets", "describe_share_group", "describe_share_group_offsets",
           "list_share_groups"]
