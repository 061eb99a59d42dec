"""Group APIs before the group coordinator exists: COORDINATOR_NOT_AVAILABLE (15).

A retriable error: clients that set a group id keep working with assign()
and retry group operations; ListGroups answers an empty list.
"""

from __future__ import annotations

from client.protocol import ApiKey, ErrorCode, response_class

UNAVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
MESSAGE = "consumer groups are not available yet in this raftka version"


async def handle(ctx, header, request, conn=None):
    key = ApiKey(header.api_key)
    cls = response_class(key)
    if key == ApiKey.FIND_COORDINATOR:
        return cls(error_code=UNAVAILABLE, error_message=MESSAGE, node_id=-1, host="", port=-1)
    if key in (ApiKey.JOIN_GROUP,):
        return cls(error_code=UNAVAILABLE, generation_id=-1, protocol_name=None, leader="",
                   member_id=request.member_id or "", members=[])
    if key in (ApiKey.SYNC_GROUP,):
        return cls(error_code=UNAVAILABLE, assignment=b"")
    if key in (ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP):
        return cls(error_code=UNAVAILABLE)
    if key == ApiKey.OFFSET_COMMIT:
        return cls(topics=[{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": UNAVAILABLE} for p in t.partitions]}
            for t in request.topics])
    if key == ApiKey.OFFSET_FETCH:
        topics = [{"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": UNAVAILABLE} for i in t.partition_indexes]} for t in (request.topics or [])]
        return cls(topics=topics, error_code=UNAVAILABLE)
    if key == ApiKey.DESCRIBE_GROUPS:
        return cls(groups=[{"error_code": UNAVAILABLE, "group_id": g, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": [], "authorized_operations": -(2**31)}
                           for g in request.groups])
    if key == ApiKey.LIST_GROUPS:
        return cls(error_code=0, groups=[])
    if key == ApiKey.DELETE_GROUPS:
        return cls(results=[{"group_id": g, "error_code": UNAVAILABLE} for g in request.groups_names])
    raise ValueError(f"not a group API: {key!r}")
