"""Kafka API keys, the version ranges raftka advertises, and flexibility.

ADVERTISED_VERSIONS is what the broker puts in its ApiVersions response (the
versions raftka implements; tests/unit/test_protocol_roundtrip.py checks the codec
against it). DECLARED_VERSIONS is what the codec can parse;
it equals the advertised range except ApiVersions, declared up to v3 (the
first flexible version, which librdkafka sends first) so a v3 request can be
decoded even though the broker answers it with the v0 fallback.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    UNREGISTER_BROKER = 64


# (min, max) inclusive, as advertised in the ApiVersions response.
ADVERTISED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 8),  # served 3-8; v0-2 answered with UNSUPPORTED_VERSION
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 8),
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 3),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.LIST_GROUPS: (0, 2),
    ApiKey.API_VERSIONS: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 3),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1),
    # v0-1 only: kafka-python 3.x reads DescribeAcls v2/v3 as a 2.5/3.3 broker (docs/SECURITY.md).
    ApiKey.DESCRIBE_ACLS: (0, 1),
    ApiKey.CREATE_ACLS: (0, 1),
    ApiKey.DELETE_ACLS: (0, 1),
    # Flexible from v0, yet safe to advertise: kafka-python's broker-version inference does not
    # look at keys 45/46 (unlike 48, 60, 68, 71).
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.UNREGISTER_BROKER: (0, 0),  # flexible-only too; not one kafka-python's guess reads
}

# Produce v0-2 are advertised (librdkafka 2.0 stops compressing otherwise)
# but not served.
SERVED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **ADVERTISED_VERSIONS,
    ApiKey.PRODUCE: (3, 8),
}

DECLARED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **ADVERTISED_VERSIONS,
    ApiKey.API_VERSIONS: (0, 3),
    # Flexible-only, so never advertised (kafka-python would infer a newer broker from it);
    # served for `raftka quorum status --bootstrap-server`, like kafka-metadata-quorum.
    ApiKey.DESCRIBE_QUORUM: (0, 1),
}

# The first version of each API that uses compact strings/arrays and tagged
# fields (Kafka's "flexibleVersions"). Never advertise one by accident.
FIRST_FLEXIBLE_VERSION: dict[ApiKey, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.METADATA: 9,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 6,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.DELETE_TOPICS: 4,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.CREATE_PARTITIONS: 2,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.DESCRIBE_QUORUM: 0,
    ApiKey.DESCRIBE_ACLS: 2,
    ApiKey.CREATE_ACLS: 2,
    ApiKey.DELETE_ACLS: 2,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.UNREGISTER_BROKER: 0,
}


def is_flexible(api_key: int, api_version: int) -> bool:
    """True if (api_key, api_version) uses the flexible (compact + tagged) encoding.

    Raises KeyError for an api_key raftka does not know.
    """
    return api_version >= FIRST_FLEXIBLE_VERSION[ApiKey(api_key)]


def is_advertised(api_key: int, api_version: int) -> bool:
    """True if the broker advertises (api_key, api_version) in ApiVersions."""
    try:
        low, high = ADVERTISED_VERSIONS[ApiKey(api_key)]
    except (ValueError, KeyError):  # not an API we know, or one we serve without advertising
        return False
    return low <= api_version <= high
