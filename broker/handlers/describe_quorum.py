"""DescribeQuorum (key 55): the metadata quorum as `kafka-metadata-quorum` shows it.

Advertised v0-2. v2 (KIP-853) adds each voter's controller endpoint in `nodes`, under
the first `controller.listener.names` entry, and a directory id per replica: raftka
keeps none, so it answers Kafka's "unknown", the zero UUID. Only the Raft leader knows
how far each voter has replicated, and when each last fetched and was last caught up
(v1+, raft_meta/quorum/replica_times.py); another node answers NOT_LEADER_OR_FOLLOWER
so the caller asks the leader (the active controller) instead.
"""

from __future__ import annotations

import time

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.client.protocol import ErrorCode, response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.raft_meta.security.acls import AclOperation

METADATA_TOPIC = "__cluster_metadata"

DescribeQuorumResponse = response_class(ApiKey.DESCRIBE_QUORUM)


async def handle(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE)
    if denied:
        return DescribeQuorumResponse(error_code=denied, topics=[])
    status = ctx.loader.quorum.status()
    code = 0 if status.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
    now_ms = int(time.time() * 1000)
    voters = []
    for node_id in sorted(status.voters):
        if node_id == status.node_id:  # as Kafka's leader reports itself: fetched and caught up now
            end, (fetched, caught_up) = status.commit_index, (now_ms, now_ms)
        else:
            end = status.match_index.get(node_id, -1)
            fetched, caught_up = status.fetch_times.get(node_id, (-1, -1))
        voters.append({"replica_id": node_id, "log_end_offset": end, "last_fetch_timestamp": fetched,
                       "last_caught_up_timestamp": caught_up})
    partition = {
        "partition_index": 0, "error_code": code,
        "leader_id": -1 if status.leader_id is None else status.leader_id,
        "leader_epoch": status.term, "high_watermark": status.commit_index,
        "current_voters": voters if status.is_leader else [], "observers": [],
    }
    return DescribeQuorumResponse(error_code=0, topics=[{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
                                  nodes=_nodes(status.voters, ctx.config.controller_listener_names[0]))


def _nodes(voters, listener: str) -> list[dict]:
    """KIP-853's `nodes`: each voter's controller endpoint ("host:port" in the quorum's map)."""
    nodes = []
    for node_id, address in sorted(voters.items()):
        host, _, port = address.rpartition(":")
        nodes.append({"node_id": node_id, "listeners": [{"name": listener, "host": host.strip("[]"),
                                                         "port": int(port)}]})
    return nodes
