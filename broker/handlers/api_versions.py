"""ApiVersions: the advertised ranges, `client.protocol.api_keys.ADVERTISED_VERSIONS`, and
from v3 the KIP-584 features (broker/features.py).

v3+ requests name the client software (KIP-511); as Kafka, a name or version that is not
`[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` is answered INVALID_REQUEST with no api keys.
The finalized features' epoch is the offset of the metadata image, as in Kafka's KRaft
brokers (-1 before the first record).

v5 (KIP-1242) names the cluster and node the client means to reach, both or neither (else
INVALID_REQUEST, as Kafka's `isValid`); when they are not this broker's, the answer is
REBOOTSTRAP_REQUIRED with no api keys and the connection stays open, as in Kafka 4.4."""

from __future__ import annotations

import re

from raftka.broker import features
from raftka.broker.context import BrokerContext
from raftka.client.protocol import ADVERTISED_VERSIONS, ApiVersionsResponse, ErrorCode

FIRST_FEATURES_VERSION = 3
FIRST_TARGET_CHECK_VERSION = 5
NO_NODE = -1
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_client_software(name: str | None, version: str | None) -> bool:
    """KIP-511's rule for the client software name and version of ApiVersions v3+."""
    return all(value is not None and _SOFTWARE.fullmatch(value) for value in (name, version))


def target_error(version: int, cluster_id: str | None, node_id: int, own_cluster: str, own_node: int) -> int:
    """KIP-1242's check of v5's ClusterId/NodeId: 0, INVALID_REQUEST or REBOOTSTRAP_REQUIRED."""
    if version < FIRST_TARGET_CHECK_VERSION:
        return 0
    if (cluster_id is None) != (node_id == NO_NODE):
        return ErrorCode.INVALID_REQUEST
    if cluster_id is not None and (cluster_id != own_cluster or node_id != own_node):
        return ErrorCode.REBOOTSTRAP_REQUIRED
    return 0


async def handle(ctx: BrokerContext, header, request, conn=None) -> ApiVersionsResponse:
    version = header.api_version
    if version >= FIRST_FEATURES_VERSION and not valid_client_software(
            request.client_software_name, request.client_software_version):
        code: int = ErrorCode.INVALID_REQUEST
    else:
        code = target_error(version, request.cluster_id, request.node_id, ctx.cluster_id, ctx.config.node_id)
    if code:
        return ApiVersionsResponse(error_code=code, api_keys=[], throttle_time_ms=0)
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
        ],
        throttle_time_ms=0,
    )
    if version >= FIRST_FEATURES_VERSION:
        offset = ctx.image.offset
        response.supported_features = features.supported_features(version)
        response.finalized_features = features.finalized_features()
        response.finalized_features_epoch = offset if offset > 0 else -1
    return response
