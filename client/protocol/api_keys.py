"""Kafka API keys, the version ranges raftka advertises, and flexibility.

ADVERTISED_VERSIONS is what the broker puts in its ApiVersions response (the
versions raftka implements; tests/unit/test_protocol_roundtrip.py checks the codec
against it). DECLARED_VERSIONS is what the codec can parse; it equals the advertised
range except Produce, declared from v0 so that v0-2 (never advertised) are refused per
partition. An ApiVersions
request above v5 gets the v0-layout UNSUPPORTED_VERSION answer (KIP-511).
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
    DELETE_RECORDS = 21
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    # security (issue 15, TLS/SASL helper)
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    UNREGISTER_BROKER = 64
    # transactions (issue 16, coordinator side)
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    # transactions, partition side (issue 16)
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_PRODUCERS = 61
    # KIP-848 consumer groups (issue 30)
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    # client quotas (issue 29)
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    # KIP-966 topic description (issue 29): `kafka-topics --describe` on Kafka 3.8+ tools
    DESCRIBE_TOPIC_PARTITIONS = 75
    # KIP-1142 (v0: KIP-714's ListClientMetricsResources): the config resources of each type
    LIST_CONFIG_RESOURCES = 74
    # share groups (issue 30, KIP-932): declared for the codec, not yet served or advertised
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    # the share coordinator's state APIs (KIP-932), broker to broker
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    # share group offsets (KIP-932): served by the group coordinator, not yet advertised
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# (min, max) inclusive, as advertised in the ApiVersions response.
ADVERTISED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    # As Kafka 4 (KIP-896): v0-2 carry message formats v0/v1. v9: flexible only; v10: KIP-951's
    # leader hints; v11: TRANSACTION_ABORTABLE (KIP-890); v12: transaction.version 2 (the leader
    # adds the partition to the transaction). v13 names topics by id only (docs/compatibility.md).
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 16),
    # v0: pre-KIP-896 (legacy_versions.py); v7-11: -3, -4, -5, -6 (KIP-734/405/1005/1023).
    # kafka-python 3 reads v11 as a Kafka 4.2 broker, which changes no request it sends.
    ApiKey.LIST_OFFSETS: (0, 11),
    ApiKey.METADATA: (0, 13),  # v13: a top-level error code, which Kafka 4.4's brokers never set
    # v0-1: pre-KIP-896; v8: flexible only; v9: KIP-848 member epochs and GROUP_ID_NOT_FOUND;
    # v10: topic ids instead of names. Not read by kafka-python's broker-version guess.
    ApiKey.OFFSET_COMMIT: (0, 10),
    # v7: require_stable (KIP-447); v8: a batch of groups; v9: member id and epoch (KIP-848);
    # v10: topic ids instead of names.
    ApiKey.OFFSET_FETCH: (1, 10),
    # v4: batched keys (KIP-699); v5: may answer TRANSACTION_ABORTABLE (never does); v6: key
    # type 2, the share coordinator (KIP-932; broker/group/share_coordinator.py).
    ApiKey.FIND_COORDINATOR: (0, 6),
    # v7: protocol type (KIP-559), v8: reason (KIP-800), v9: SkipAssignment (KIP-814).
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),  # v4: flexible only
    ApiKey.LEAVE_GROUP: (0, 5),  # v5: a reason per member (KIP-800), logged
    ApiKey.SYNC_GROUP: (0, 5),  # v5: protocol type and name checked and answered (KIP-559)
    ApiKey.DESCRIBE_GROUPS: (0, 6),  # v6: GROUP_ID_NOT_FOUND for an unknown group (KIP-1043)
    ApiKey.LIST_GROUPS: (0, 5),
    # v3+: KIP-511 client software, KIP-584 features (broker/features.py); v5: the client's
    # cluster and node ids checked (KIP-1242, REBOOTSTRAP_REQUIRED).
    ApiKey.API_VERSIONS: (0, 5),
    ApiKey.CREATE_TOPICS: (0, 7),  # v0-1: pre-KIP-896; v5+ configs (KIP-525), v6 strict mutation quota, v7 id
    ApiKey.DELETE_TOPICS: (0, 6),  # v0: pre-KIP-896; v4: flexible only; v5 messages, strict quota; v6 ids
    # v3+: KIP-360 recovery; v4: PRODUCER_FENCED; v5: TRANSACTION_ABORTABLE (docs/transactions.md)
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),  # v4: flexible only
    ApiKey.DESCRIBE_CONFIGS: (0, 4),  # v0: pre-KIP-896; v4: flexible only
    # v2: flexible; v3 may answer THROTTLING_QUOTA_EXCEEDED, which raftka (controller_mutation_rate
    # not enforced, docs/compatibility.md) never does.
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 3),  # v3: a per-group error message, in Kafka 4.4's words
    # v2: flexible; v3: the USER resource type. kafka-python 3 reads DescribeAcls v3 as a 3.3
    # broker only when nothing newer matches (ListOffsets v11 makes it 4.2).
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),  # v5: IsCordoned, false (raftka cordons no directory)
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),  # v2: fenced brokers on request (KIP-1073)
    # SaslHandshake v0 (raw SASL frames, kafka-python <= 2.0) is not served; SaslAuthenticate
    # v2 is v1, flexible (docs/security.md).
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # Flexible from v0, yet safe to advertise: kafka-python's broker-version inference does not
    # look at keys 45/46 (unlike 48, 60, 68, 71).
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.UNREGISTER_BROKER: (0, 0),  # flexible-only too; not one kafka-python's guess reads
    # Flexible-only, and not read by kafka-python 3's broker-version guess either (it looks at
    # Produce, Fetch, ListOffsets, Metadata, OffsetFetch, JoinGroup, DescribeAcls, DescribeLogDirs,
    # AddPartitionsToTxn, DescribeClientQuotas, LeaderAndIsr): `kafka-metadata-quorum describe`,
    # `kafka-configs --entity-type users` and librdkafka's SCRAM admin calls need them advertised.
    ApiKey.DESCRIBE_QUORUM: (0, 2),  # v2: KIP-853 nodes and listeners (no directory ids: zero)
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # Transactions: v4+ of AddPartitionsToTxn is broker-to-broker (KIP-890: v4 verify_only, v5
    # adds for transaction.version 2). kafka-python reads v4 as a 3.6 broker, which ListOffsets
    # v10 (4.0) outranks; its producer sends v3 at most.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),  # v4: TRANSACTION_ABORTABLE
    ApiKey.END_TXN: (0, 5),  # v4: TRANSACTION_ABORTABLE; v5: transaction.version 2 (an epoch bump each)
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),  # v2: an RE2 transactional id pattern (KIP-1152)
    # Transactions, partition side (docs/transactions.md): none is read by kafka-python's guess.
    # v0 is Kafka 3.x's (Kafka 4 serves v1+ only); v2: each marker's transaction version (KIP-1228)
    ApiKey.WRITE_TXN_MARKERS: (0, 2),
    # v4: TRANSACTION_ABORTABLE; v5: transaction.version 2 (the group coordinator adds the offsets
    # partition to the transaction); v6 (KIP-848 member epochs, topic ids) is not served.
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # KIP-848 (docs/architecture.md, groups): v1 of the heartbeat has client-generated member
    # ids (KIP-1082), v1 of describe the member type (KIP-1099).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # As Kafka 4.4. kafka-python reads DescribeClientQuotas v0 as a 2.6 broker, but only when
    # nothing newer matches (Fetch v16 already makes it 3.7).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # KIP-966, paginated (broker/handlers/describe_topic_partitions.py); flexible-only, and not
    # read by kafka-python 3's broker-version guess. Without it Kafka's `kafka-topics --describe`
    # falls back to Metadata and prints `Elr: N/A`.
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # As Kafka 4.4 (broker/handlers/list_config_resources.py); flexible-only, not read by
    # kafka-python 3's broker-version guess. `kafka-client-metrics --list` needs it.
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
    # Share groups (KIP-932), Kafka 4.4's versions (v0 was 4.0's early access, removed in 4.1);
    # flexible-only, none read by kafka-python 3's broker-version guess. Kafka's share consumer,
    # kafka-share-groups and kafka-console-share-consumer need them.
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),  # v1: Lag (KIP-1226)
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # The share coordinator's state APIs: broker to broker, but on Kafka's broker listener, so
    # Kafka 4.4 advertises them to clients too.
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
}

# Exactly what is advertised (tests/compat/test_advertised_versions.py walks it against a
# broker). Produce v0-2 used to be advertised too, then refused: librdkafka 2.0.x stops
# compressing when Produce v2 is missing, as it does against Kafka 4, which dropped them.
SERVED_VERSIONS: dict[ApiKey, tuple[int, int]] = dict(ADVERTISED_VERSIONS)

DECLARED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **ADVERTISED_VERSIONS,
    # Produce v0-2 are decoded (never advertised) so an old client gets UNSUPPORTED_VERSION
    # per partition instead of a closed connection.
    ApiKey.PRODUCE: (0, 12),
}

# (api, version) served although not advertised (see DECLARED_VERSIONS).
SERVED_UNADVERTISED_VERSIONS: frozenset[tuple[ApiKey, int]] = frozenset()

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
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.DESCRIBE_LOG_DIRS: 2,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.OFFSET_DELETE: 99,  # no flexible version
    ApiKey.DESCRIBE_CLUSTER: 0,
    ApiKey.SASL_HANDSHAKE: 99,  # never flexible (frozen, KAFKA-9577)
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.UNREGISTER_BROKER: 0,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 0,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
    ApiKey.LIST_CONFIG_RESOURCES: 0,
    ApiKey.SHARE_GROUP_HEARTBEAT: 0,
    ApiKey.SHARE_GROUP_DESCRIBE: 0,
    ApiKey.SHARE_FETCH: 0,
    ApiKey.SHARE_ACKNOWLEDGE: 0,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE: 0,
    ApiKey.WRITE_SHARE_GROUP_STATE: 0,
    ApiKey.DELETE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 0,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 0,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: 0,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: 0,
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
