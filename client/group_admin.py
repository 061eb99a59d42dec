"""Consumer-group administration over a Cluster: list, describe (with committed offsets and
lag, like kafka-consumer-groups.sh --describe) and delete. Used by `raftka groups`."""

from __future__ import annotations

from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, error_for_code
from raftka.client.group_membership import GroupMembership
from raftka.client.group_protocol import decode_assignment
from raftka.client.list_offsets import LATEST, list_offsets_once
from raftka.client.protocol import (
    ApiKey,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ErrorCode,
    ListGroupsRequest,
)
from raftka.client.records import TopicPartition


@dataclass(frozen=True)
class GroupMemberView:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None  # set for a static member (KIP-345)


@dataclass(frozen=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    log_end: int | None
    member_id: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


@dataclass(frozen=True)
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMemberView, ...]
    partitions: tuple[PartitionLag, ...]


async def list_groups(cluster: Cluster) -> list[tuple[str, str]]:
    """(group id, protocol type) of every group on every broker (each answers for its own)."""
    metadata = await cluster.refresh_metadata()
    out: dict[str, str] = {}
    for node_id in metadata.brokers:
        try:
            response = await cluster.send_to(node_id, ApiKey.LIST_GROUPS, ListGroupsRequest())
        except KafkaConnectionError:
            continue
        for g in response.groups:
            out[g.group_id] = g.protocol_type
    return sorted(out.items())


async def describe_group(cluster: Cluster, group_id: str) -> GroupView:
    membership = GroupMembership(cluster, group_id, request_timeout_ms=int(cluster.request_timeout * 1000))
    response = await membership._send(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
        groups=[group_id], include_authorized_operations=False))
    (g,) = response.groups
    # v6+ (KIP-1043) names an unknown group GROUP_ID_NOT_FOUND, still in state Dead: the view
    # is the one earlier versions give (a Dead group may still hold committed offsets).
    if g.error_code and g.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        raise error_for_code(g.error_code, f"DescribeGroups {group_id!r}")
    members = []
    owner: dict[TopicPartition, str] = {}
    for m in g.members:
        assigned = decode_assignment(bytes(m.member_assignment)).partitions if g.protocol_type == "consumer" else ()
        members.append(GroupMemberView(m.member_id, m.client_id, m.client_host, tuple(assigned),
                                       m.group_instance_id))
        owner.update(dict.fromkeys(assigned, m.member_id))
    committed = await _all_committed(membership)
    tps = sorted(set(committed) | set(owner))
    ends = await _log_end_offsets(cluster, tps)
    partitions = tuple(PartitionLag(tp, committed.get(tp), ends.get(tp), owner.get(tp)) for tp in tps)
    return GroupView(group_id, g.group_state, g.protocol_type, g.protocol_data, tuple(members), partitions)


async def _all_committed(membership: GroupMembership) -> dict[TopicPartition, int]:
    from raftka.client.protocol import OffsetFetchRequest

    response = await membership._send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(
        group_id=membership.group_id, topics=None))
    if response.error_code:
        raise error_for_code(response.error_code, f"OffsetFetch {membership.group_id!r}")
    return {TopicPartition(t.name, p.partition_index): p.committed_offset
            for t in response.topics for p in t.partitions if p.committed_offset >= 0}


async def _log_end_offsets(cluster: Cluster, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Best effort, one round: a partition whose leader does not answer shows no lag."""
    await cluster.refresh_metadata({tp.topic for tp in tps})
    return (await list_offsets_once(cluster, {tp: LATEST for tp in tps})).offsets


async def delete_group(cluster: Cluster, group_id: str) -> None:
    """Delete an empty group and its committed offsets (NonEmptyGroupError while it has members)."""
    membership = GroupMembership(cluster, group_id, request_timeout_ms=int(cluster.request_timeout * 1000))
    response = await membership._send(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group_id]))
    (result,) = response.results
    if result.error_code:
        raise error_for_code(result.error_code, f"DeleteGroups {group_id!r}")
