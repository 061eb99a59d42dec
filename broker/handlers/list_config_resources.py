"""ListConfigResources (KIP-1142; v0 was KIP-714's ListClientMetricsResources): the names of
the config resources of the types asked for, as Kafka 4.4's broker lists them.

v0 lists client-metrics subscriptions only. v1 asks for types; none asked means every type
Kafka supports here (topic, broker, broker logger, client metrics, group); one it does not
support fails the whole request with UNSUPPORTED_VERSION. The caller needs DESCRIBE_CONFIGS
on the cluster. Kafka's order: groups, client metrics, broker loggers, brokers, topics.
"""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.handlers.metadata import live_broker_endpoints
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.controller.config_decisions import CLIENT_METRICS
from raftka.raft_meta.security.acls import AclOperation

ListConfigResourcesResponse = response_class(ApiKey.LIST_CONFIG_RESOURCES)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS_TYPE, GROUP = 2, 4, 8, 16, 32
SUPPORTED_V0 = frozenset({CLIENT_METRICS_TYPE})
SUPPORTED_V1 = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS_TYPE, GROUP})


def list_resources(image, broker_ids: list[int], version: int, asked: list[int]) -> tuple[int, list[dict]]:
    """(error code, resources) for the types `asked` at `version` (pure, over the image)."""
    supported = SUPPORTED_V0 if version == 0 else SUPPORTED_V1
    wanted = set(asked) if asked else set(supported)
    if not wanted <= supported:
        return int(ErrorCode.UNSUPPORTED_VERSION), []
    out: list[dict] = []

    def add(names, resource_type: int) -> None:
        out.extend({"resource_name": name, "resource_type": resource_type} for name in names)

    if GROUP in wanted:
        add(sorted(name for kind, name in image.configs if kind == "group"), GROUP)
    if CLIENT_METRICS_TYPE in wanted:
        add(sorted(name for kind, name in image.configs if kind == CLIENT_METRICS), CLIENT_METRICS_TYPE)
    if BROKER_LOGGER in wanted:
        add([str(b) for b in broker_ids], BROKER_LOGGER)
    if BROKER in wanted:
        add([str(b) for b in broker_ids], BROKER)
    if TOPIC in wanted:
        add(sorted(image.topic_ids), TOPIC)
    return 0, out


async def handle(ctx, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE_CONFIGS)
    if denied:
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=denied, config_resources=[])
    brokers = [node_id for node_id, *_ in live_broker_endpoints(ctx.image, conn)]
    error, resources = list_resources(ctx.image, brokers, header.api_version,
                                      list(getattr(request, "resource_types", None) or ()))
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=error, config_resources=resources)
