"""ApiVersions: the advertised ranges, `client.protocol.api_keys.ADVERTISED_VERSIONS` (never a
flexible-only API)."""

from __future__ import annotations

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiVersionsResponse


async def handle(ctx, header, request, conn=None) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
        ],
        throttle_time_ms=0,
    )
