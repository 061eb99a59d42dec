"""The share coordinator's state APIs (KIP-932, broker to broker): InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87) — request translation around `ctx.share_coordinator`
(broker/group/share_coordinator.py), one share partition at a time, as Kafka's
ShareCoordinatorService schedules them.

As Kafka's KafkaApis: the caller needs CLUSTER_ACTION on the cluster (every partition
answers CLUSTER_AUTHORIZATION_FAILED otherwise); an empty group id, no topics, or a topic
with no partitions is answered with no results at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.group.share_coordinator_state import Answer, StateBatch
from raftka.broker.group.share_persister import ShareStateKey
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

InitializeShareGroupStateResponse = response_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
ReadShareGroupStateResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE)
WriteShareGroupStateResponse = response_class(ApiKey.WRITE_SHARE_GROUP_STATE)
DeleteShareGroupStateResponse = response_class(ApiKey.DELETE_SHARE_GROUP_STATE)
ReadShareGroupStateSummaryResponse = response_class(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

PartitionCall = Callable[[ShareStateKey, Any], Awaitable[Answer]]
Shape = Callable[[Any, Answer], dict[str, Any]]


async def _each_partition(ctx: BrokerContext, conn, request, call: PartitionCall, shape: Shape,
                          ) -> list[dict[str, Any]]:
    """Results per topic: `call(key, partition data)` for each partition, shaped by `shape`."""
    if not request.group_id or not request.topics or any(not t.partitions for t in request.topics):
        return []
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.CLUSTER_ACTION)
    coordinator = ctx.share_coordinator
    results = []
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            key = ShareStateKey(request.group_id, topic.topic_id, data.partition)
            if denied:
                answer = Answer(denied, "not authorized to CLUSTER_ACTION the cluster")
            elif coordinator is None:
                answer = Answer(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "this broker runs no share coordinator")
            else:
                answer = await call(key, data)
            partitions.append({"partition": data.partition, "error_code": answer.error,
                               "error_message": answer.message if answer.error else None, **shape(data, answer)})
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return results


def _no_fields(_data, _answer: Answer) -> dict[str, Any]:
    return {}


def _batches(rows) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in rows)


async def handle_initialize(ctx: BrokerContext, header, request, conn=None):
    async def call(key, data):
        return await ctx.share_coordinator.initialize(key, data.state_epoch, data.start_offset)
    return InitializeShareGroupStateResponse(results=await _each_partition(ctx, conn, request, call, _no_fields))


async def handle_read(ctx: BrokerContext, header, request, conn=None):
    async def call(key, data):
        return await ctx.share_coordinator.read(key, data.leader_epoch)

    def shape(_data, answer: Answer) -> dict[str, Any]:
        state = answer.state
        if answer.error or state is None:
            return {"state_epoch": 0, "start_offset": 0, "state_batches": []}
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": [
            {"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
             "delivery_count": b.delivery_count} for b in state.batches]}
    return ReadShareGroupStateResponse(results=await _each_partition(ctx, conn, request, call, shape))


async def handle_write(ctx: BrokerContext, header, request, conn=None):
    async def call(key, data):
        return await ctx.share_coordinator.write(key, data.state_epoch, data.leader_epoch, data.start_offset,
                                                 _batches(data.state_batches),
                                                 getattr(data, "delivery_complete_count", -1))
    return WriteShareGroupStateResponse(results=await _each_partition(ctx, conn, request, call, _no_fields))


async def handle_delete(ctx: BrokerContext, header, request, conn=None):
    async def call(key, _data):
        return await ctx.share_coordinator.delete(key)
    return DeleteShareGroupStateResponse(results=await _each_partition(ctx, conn, request, call, _no_fields))


async def handle_read_summary(ctx: BrokerContext, header, request, conn=None):
    async def call(key, _data):
        return await ctx.share_coordinator.read_summary(key)

    def shape(_data, answer: Answer) -> dict[str, Any]:
        state = answer.state
        if answer.error or state is None:
            return {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1}
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": state.delivery_complete_count}
    return ReadShareGroupStateSummaryResponse(results=await _each_partition(ctx, conn, request, call, shape))


HANDLERS = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_summary,
}
