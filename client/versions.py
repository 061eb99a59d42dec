"""Which version of each API the SDK speaks to a given broker (pure).

The SDK can speak what the broker serves, except ApiVersions v3-4 (the SDK
has no use for their feature levels), Fetch v12+, FindCoordinator v4+, OffsetCommit v10,
OffsetFetch v8+ and the versions of transaction version 2 (KIP-890 part 2), and also Kafka
4.4's share-group APIs (the share consumer, `raftka share-groups`) wherever a broker serves
them. After ApiVersions, each API
gets the highest version inside both ranges; an API with no overlap is
simply absent, and using it raises UnsupportedVersionError.
"""

from __future__ import annotations

from collections.abc import Mapping

from raftka.client.errors import UnsupportedVersionError
from raftka.client.protocol import DECLARED_VERSIONS, SERVED_VERSIONS, ApiKey

# Share groups (KIP-932): what AsyncShareConsumer and the share-group admin calls send, at Kafka
# 4.4's versions, to any broker that advertises them (raftka's brokers do not yet).
SHARE_GROUP_APIS = frozenset({
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
})

# What this SDK can encode and decode, per API.
CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **SERVED_VERSIONS,
    ApiKey.API_VERSIONS: (0, 2),
    # The SDK (and the brokers' replica fetchers) fetch by topic name: v12+ add flexible
    # encodings and topic ids (v13) that they do not need.
    ApiKey.FETCH: (4, 11),
    # The SDK looks up one coordinator at a time: v4+ batch the keys (KIP-699).
    ApiKey.FIND_COORDINATOR: (0, 3),
    # By topic name and one group at a time: OffsetCommit v10 and OffsetFetch v10 name topics
    # by id, OffsetFetch v8+ batch groups. v9 is what consumer-protocol members must commit with.
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (1, 7),
    # The SDK's transactions are the classic protocol (client/transactions.py): Produce v10+
    # and the KIP-890 versions (TRANSACTION_ABORTABLE, transaction version 2's implicit adds
    # and epoch bump per EndTxn) are for clients that implement them.
    ApiKey.PRODUCE: (3, 9),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    **{key: DECLARED_VERSIONS[key] for key in SHARE_GROUP_APIS},
}

# The first ApiVersions request; a broker that cannot parse it answers with
# error 35 in the v0 layout and we ask again with v0.
API_VERSIONS_FIRST_TRY = 2


def choose_versions(
    broker: Mapping[int, tuple[int, int]],
    client: Mapping[ApiKey, tuple[int, int]] = CLIENT_VERSIONS,
) -> dict[ApiKey, int]:
    """For every API both sides know, the highest version both support."""
    chosen: dict[ApiKey, int] = {}
    for key, (client_low, client_high) in client.items():
        theirs = broker.get(int(key))
        if theirs is None:
            continue
        low, high = max(client_low, theirs[0]), min(client_high, theirs[1])
        if low <= high:
            chosen[key] = high
    return chosen


def version_for(chosen: Mapping[ApiKey, int], api_key: ApiKey) -> int:
    """The negotiated version of `api_key`, or UnsupportedVersionError naming both ranges."""
    try:
        return chosen[api_key]
    except KeyError:
        low, high = CLIENT_VERSIONS.get(api_key, (None, None))
        raise UnsupportedVersionError(
            f"the broker supports no version of {api_key.name} that this client speaks "
            f"(client speaks {low}..{high})"
        ) from None


def min_version_check(chosen: Mapping[ApiKey, int], api_key: ApiKey, minimum: int,
                      why: str) -> int:
    """The negotiated version of `api_key`, requiring at least `minimum` (e.g. zstd needs
    Produce v7)."""
    version = version_for(chosen, api_key)
    if version < minimum:
        raise UnsupportedVersionError(
            f"{why} needs {api_key.name} v{minimum}+, but the broker only supports up to "
            f"v{version}"
        )
    return version
