"""DescribeCluster: the cluster id, the active controller and the live brokers (the same view
as Metadata, on the connection's listener; from v2 the fenced ones too when asked, KIP-1073),
and the cluster's authorized operations when asked."""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.handlers.metadata import live_broker_endpoints
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

DescribeClusterResponse = response_class(ApiKey.DESCRIBE_CLUSTER)

ENDPOINT_TYPE_BROKER = 1  # v1+: 2 asks for controllers, which Kafka brokers refuse too


async def handle(ctx: BrokerContext, header, request, conn=None):
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKER)
    image = ctx.image
    if endpoint_type != ENDPOINT_TYPE_BROKER:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {endpoint_type}; a broker answers only {ENDPOINT_TYPE_BROKER} (brokers)",
            endpoint_type=endpoint_type, cluster_id=ctx.cluster_id or "", controller_id=-1, brokers=[],
            cluster_authorized_operations=authz.OMITTED)
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE)
    if denied:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=denied, error_message="not authorized to DESCRIBE the cluster",
            endpoint_type=endpoint_type, cluster_id=ctx.cluster_id or "", controller_id=-1, brokers=[],
            cluster_authorized_operations=authz.OMITTED)
    # v2 (KIP-1073): registered but fenced brokers too when asked, each marked.
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    brokers = [{"broker_id": node_id, "host": host, "port": port, "rack": rack,
                "is_fenced": not image.is_live(node_id)}
               for node_id, host, port, rack in live_broker_endpoints(image, conn, include_fenced=include_fenced)]
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=endpoint_type,
        cluster_id=ctx.cluster_id or "", controller_id=image.controller.node_id, brokers=brokers,
        cluster_authorized_operations=authz.authorized_operations(
            ctx, conn, authz.CLUSTER, "", request.include_cluster_authorized_operations))
