"""Consumer-group administration over a Cluster: list, describe (with committed offsets and
lag, like kafka-consumer-groups.sh --describe) and delete. Used by `raftka groups`."""

from __future__ import annotations

from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaConnectionError, UnsupportedVersionError, error_for_code
from raftka.client.group_membership import GroupMembership
from raftka.client.group_protocol import decode_assignment
from raftka.client.list_offsets import LATEST, list_offsets_once
from raftka.client.metadata import BrokerInfo
from raftka.client.protocol import (
    ApiKey,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ErrorCode,
    ListGroupsRequest,
)
from raftka.client.protocol.messages import request_class
from raftka.client.records import TopicPartition

MEMBER_CLASSIC, MEMBER_CONSUMER = 0, 1  # ConsumerGroupDescribe's MemberType


@dataclass(frozen=True)
class GroupMemberView:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None  # set for a static member (KIP-345)
    # KIP-848 (group.protocol=consumer) members: their epoch and target assignment
    member_epoch: int | None = None
    target_assignment: tuple[TopicPartition, ...] = ()
    subscribed_topics: tuple[str, ...] = ()  # the names it subscribes to
    subscribed_regex: str | None = None  # or its pattern (KIP-848: resolved by the coordinator)
    # In a consumer group (ConsumerGroupDescribe v1, KIP-1099): MEMBER_CLASSIC for a classic
    # member (JoinGroup/SyncGroup, during an online migration), MEMBER_CONSUMER for one speaking
    # the consumer protocol; None when unknown (a classic group, or an older broker).
    member_type: int | None = None

    @property
    def classic(self) -> bool:
        return self.member_type == MEMBER_CLASSIC


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
    # KIP-848 groups only (ConsumerGroupDescribe): None for a classic group
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    coordinator: BrokerInfo | None = None  # the broker that answered for the group


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
    if g.group_state == "Dead" and not g.members:  # maybe a KIP-848 group (not a classic one)
        view = await _describe_consumer_group(cluster, membership, group_id)
        if view is not None:
            return view
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
    return GroupView(group_id, g.group_state, g.protocol_type, g.protocol_data, tuple(members), partitions,
                     coordinator=_coordinator(cluster, membership))


def _tps(assignment) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions))


async def _describe_consumer_group(cluster: Cluster, membership: GroupMembership, group_id: str) -> GroupView | None:
    """A KIP-848 group (ConsumerGroupDescribe); None when `group_id` is not one, or the broker
    does not serve the API."""
    try:
        response = await membership._send(ApiKey.CONSUMER_GROUP_DESCRIBE, request_class(
            ApiKey.CONSUMER_GROUP_DESCRIBE)(group_ids=[group_id], include_authorized_operations=False))
    except UnsupportedVersionError:
        return None
    (g,) = response.groups
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if g.error_code:
        raise error_for_code(g.error_code, f"ConsumerGroupDescribe {group_id!r}")
    members = tuple(GroupMemberView(m.member_id, m.client_id, m.client_host, _tps(m.assignment), m.instance_id,
                                    m.member_epoch, _tps(m.target_assignment), tuple(m.subscribed_topic_names or ()),
                                    m.subscribed_topic_regex or None,
                                    m.member_type if m.member_type >= 0 else None) for m in g.members)
    owner = {tp: m.member_id for m in members for tp in m.assignment}
    committed = await _all_committed(membership)
    tps = sorted(set(committed) | set(owner))
    ends = await _log_end_offsets(cluster, tps)
    partitions = tuple(PartitionLag(tp, committed.get(tp), ends.get(tp), owner.get(tp)) for tp in tps)
    return GroupView(group_id, g.group_state, "consumer", g.assignor_name, members, partitions,
                     g.group_epoch, g.assignment_epoch, _coordinator(cluster, membership))


def _coordinator(cluster: Cluster, membership: GroupMembership) -> BrokerInfo | None:
    node = membership.coordinator_id
    return None if node is None else cluster.metadata.broker(node)


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
