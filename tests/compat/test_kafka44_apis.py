"""Kafka 4.4's APIs that issue #29 found missing or unadvertised, through real clients:
kafka-python 3's admin client (DescribeQuorum v2, ApiVersions v4's features, DescribeGroups
v6) and librdkafka (ListOffsets' max-timestamp and earliest-local specs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection
from tests.support import wait_until


@pytest.fixture(scope="module")
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    yield admin
    admin.close()


def test_describe_metadata_quorum(kp_admin: KafkaAdminClient, server) -> None:
    """kafka-python asks DescribeQuorum v2 (KIP-853) and reads its per-partition error_message."""
    described = kp_admin.describe_metadata_quorum()
    [topic] = described["topics"]
    [partition] = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata" and partition["error"] is None
    assert partition["leader_id"] == 1 and partition["high_watermark"] > 0
    assert [v["replica_id"] for v in partition["current_voters"]] == [1]
    [node] = described["nodes"]
    [listener] = node["listeners"]
    assert node["node_id"] == 1 and listener["name"] == "CONTROLLER" and listener["host"] == "127.0.0.1"


def test_describe_features(kp_admin: KafkaAdminClient) -> None:
    """kafka-python sends ApiVersions v4 (KIP-584): every feature, the finalized ones above 0."""
    described = kp_admin.describe_features()
    assert described["metadata.version"]["supported"] == (7, 20)  # 3.3-IV3 .. 3.8-IV0
    assert described["metadata.version"]["finalized"] == (20, 20)
    assert described["metadata.version"]["finalized_epoch"] > 0
    assert described["kraft.version"] == {"supported": (0, 0)}  # finalized at 0: not listed
    assert described["transaction.version"]["supported"] == (0, 2)  # KIP-890 part 2
    assert described["transaction.version"]["finalized"] == (2, 2)
    assert described["group.version"]["supported"] == (0, 1)  # KIP-848's consumer protocol
    assert described["group.version"]["finalized"] == (1, 1)
    assert described["share.version"]["supported"] == (0, 2)  # share groups (KIP-932), their DLQ (KIP-1191)
    assert described["share.version"]["finalized"] == (2, 2)


@pytest.mark.parametrize(("version", "features"), [
    (2, None),
    (3, ["metadata.version"]),  # v3 leaves out features whose minimum is 0 (KAFKA-17492)
    (4, ["metadata.version", "kraft.version", "transaction.version", "group.version", "share.version"]),
])
def test_api_versions_at_each_version(bootstrap: str, version: int, features) -> None:
    body = {"client_software_name": "raftka-tests", "client_software_version": "1.0"}
    with WireConnection(bootstrap) as conn:
        response = conn.request(ApiKey.API_VERSIONS, version, body)
    assert response.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {int(key): versions for key, versions in ADVERTISED_VERSIONS.items()}
    if features is None:
        return
    assert [f.name for f in response.supported_features] == features
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("metadata.version", 20, 20), ("transaction.version", 2, 2), ("group.version", 1, 1), ("share.version", 2, 2)]


@pytest.mark.parametrize("name", ["", "bad name", "-dash-first"])
def test_api_versions_refuses_a_malformed_client_software_name(bootstrap: str, name: str) -> None:
    """As Kafka (KIP-511): INVALID_REQUEST with no api keys, and the connection stays usable."""
    with WireConnection(bootstrap) as conn:
        refused = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": name,
                                                        "client_software_version": "1.0"})
        assert refused.error_code == ErrorCode.INVALID_REQUEST and refused.api_keys == []
        assert conn.request(ApiKey.API_VERSIONS, 2, {}).error_code == 0


def _coordinator_ready(bootstrap: str, group: str) -> None:
    """Wait for `__consumer_offsets` to exist and the group's coordinator to have loaded it
    (until then DescribeGroups v0 answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS)."""
    def loaded() -> bool:
        with WireConnection(bootstrap) as conn:
            conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
            return conn.request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]}).groups[0].error_code == 0
    wait_until(loaded, timeout=30.0, interval=0.2, what=f"the coordinator of {group}")


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_groups_of_an_unknown_group_at_each_version(bootstrap: str, version: int) -> None:
    """Dead with no error up to v5; from v6 GROUP_ID_NOT_FOUND and Kafka's message (KIP-1043)."""
    _coordinator_ready(bootstrap, "kp-no-such-group")
    with WireConnection(bootstrap) as conn:
        [group] = conn.request(ApiKey.DESCRIBE_GROUPS, version, {"groups": ["kp-no-such-group"]}).groups
    assert (group.group_id, group.group_state, group.members) == ("kp-no-such-group", "Dead", [])
    if version >= 6:
        assert (group.error_code, group.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group kp-no-such-group not found.")
    else:
        assert group.error_code == 0


def test_describe_groups_through_kafka_python_and_librdkafka(kp_admin: KafkaAdminClient, bootstrap: str) -> None:
    """kafka-python asks v6 (the unknown group is an error, the known one Empty); librdkafka asks
    v5 and gets Dead for the unknown group, as from Kafka 4.4."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kp-dg-topic", 1, 1)])["kp-dg-topic"].result(20)
    _coordinator_ready(bootstrap, "kp-dg-known")
    offsets = ConsumerGroupTopicPartitions("kp-dg-known", [TopicPartition("kp-dg-topic", 0, 3)])
    admin.alter_consumer_group_offsets([offsets])["kp-dg-known"].result(20)

    described = kp_admin.describe_groups(["kp-dg-known", "kp-dg-unknown"])
    assert described["kp-dg-known"]["error"] is None and described["kp-dg-known"]["group_state"] == "Empty"
    unknown = described["kp-dg-unknown"]
    assert unknown["group_state"] == "Dead" and "GroupIdNotFound" in unknown["error"]
    assert "Group kp-dg-unknown not found." in unknown["error"]

    futures = admin.describe_consumer_groups(["kp-dg-known", "kp-dg-unknown"], request_timeout=20)
    assert futures["kp-dg-known"].result(20).state == ConsumerGroupState.EMPTY
    assert futures["kp-dg-unknown"].result(20).state == ConsumerGroupState.DEAD


TOPIC_LO = "kp-list-offsets"


@pytest.fixture(scope="module")
def timestamps_topic(bootstrap: str) -> str:
    """Records at timestamps 1000, 2000, 5000, 3000, 5000 (offsets 0-4), then offset 0 deleted."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC_LO, 1, 1)])[TOPIC_LO].result(20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, ts in enumerate((1000, 2000, 5000, 3000, 5000)):
        producer.produce(TOPIC_LO, b"v%d" % i, partition=0, timestamp=ts)
        producer.flush(20)  # one batch per record
    assert producer.flush(20) == 0
    [deleted] = admin.delete_records([TopicPartition(TOPIC_LO, 0, 1)]).values()
    assert deleted.result(20).low_watermark == 1
    return TOPIC_LO


# (timestamp, the first version that may ask it, (offset, timestamp) answered from then on)
LIST_OFFSETS_CASES = [
    (-1, 0, (5, -1)),      # latest
    (-2, 0, (1, -1)),      # earliest: the log start after DeleteRecords
    (-3, 7, (2, 5000)),    # max timestamp: the first record holding it
    (-4, 8, (1, -1)),      # earliest local: nothing is tiered, so the log start
    (-5, 9, (-1, -1)),     # latest tiered: no remote storage
    (-6, 11, (-1, -1)),    # earliest pending upload: no remote storage
    (-7, 99, (-1, -1)),    # not a special timestamp: refused in every version
    (2500, 0, (2, 5000)),  # by timestamp: the first offset whose timestamp is >= it
    (5001, 0, (-1, -1)),
]


@pytest.mark.parametrize("version", [1, 5, 6, 7, 8, 9, 10, 11])
def test_list_offsets_special_timestamps_at_each_version(bootstrap: str, timestamps_topic: str,
                                                         version: int) -> None:
    """As Kafka 4.4 answers (tests/differential/wire_steps.py): a special timestamp older
    versions do not know is UNSUPPORTED_VERSION for its partition."""
    partitions = [{"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1}
                  for ts, _, _ in LIST_OFFSETS_CASES]
    body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 30000,
            "topics": [{"name": timestamps_topic, "partitions": partitions}]}
    with WireConnection(bootstrap) as conn:
        [topic] = conn.request(ApiKey.LIST_OFFSETS, version, body).topics
    answers = [(p.error_code, p.offset, p.timestamp) for p in topic.partitions]
    assert answers == [(0, *expected) if version >= first else (ErrorCode.UNSUPPORTED_VERSION, -1, -1)
                       for _, first, expected in LIST_OFFSETS_CASES]


def test_list_offsets_specs_through_kafka_python_and_librdkafka(bootstrap: str, timestamps_topic: str,
                                                               kp_admin: KafkaAdminClient) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import OffsetSpec as KpOffsetSpec

    tp = KpTopicPartition(timestamps_topic, 0)
    found = kp_admin.list_partition_offsets({tp: KpOffsetSpec.MAX_TIMESTAMP})[tp]
    assert (found.offset, found.timestamp) == (2, 5000)
    assert kp_admin.list_partition_offsets({tp: KpOffsetSpec.EARLIEST_LOCAL})[tp].offset == 1
    assert kp_admin.list_partition_offsets({tp: KpOffsetSpec.LATEST_TIERED})[tp].offset == -1

    admin = AdminClient({"bootstrap.servers": bootstrap})
    ctp = TopicPartition(timestamps_topic, 0)
    info = admin.list_offsets({ctp: OffsetSpec.max_timestamp()})[ctp].result(20)
    assert (info.offset, info.timestamp) == (2, 5000)


def test_max_timestamp_stops_at_the_last_stable_offset(bootstrap: str) -> None:
    """An open transaction's record holds the max timestamp: read_uncommitted names it, and
    read_committed nothing (Kafka answers -1 when the record is at or past the LSO)."""
    from confluent_kafka import IsolationLevel, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    topic = "kp-list-offsets-txn"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"committed", partition=0, timestamp=1000)
    assert plain.flush(20) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kp-lo-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"open", partition=0, timestamp=9000)
    assert txn.flush(20) == 0
    try:
        tp = TopicPartition(topic, 0)
        spec = {tp: OffsetSpec.max_timestamp()}
        uncommitted = admin.list_offsets(spec, isolation_level=IsolationLevel.READ_UNCOMMITTED)[tp].result(20)
        assert (uncommitted.offset, uncommitted.timestamp) == (1, 9000)
        committed = admin.list_offsets(spec, isolation_level=IsolationLevel.READ_COMMITTED)[tp].result(20)
        assert committed.offset == -1
    finally:
        txn.abort_transaction(30)


DTP_TOPIC = "kp-dtp-paged"  # 5 partitions, more than the page limit the test asks


def test_describe_topic_partitions_pages_through_kafka_python(kp_admin: KafkaAdminClient, bootstrap: str) -> None:
    """DescribeTopicPartitions (KIP-966) through kafka-python 3's admin, 2 partitions a page: the
    cursor walks the topic as on Kafka 4.4, and the ELR lists are empty (raftka has no ELR)."""
    from kafka.admin import NewTopic

    kp_admin.create_topics([NewTopic(DTP_TOPIC, 5, 1)])
    wait_until(lambda: len(kp_admin.describe_topic_partitions([DTP_TOPIC])["topics"][0]["partitions"]) == 5,
               timeout=30, what="the topic's 5 partitions")
    pages, cursor = [], None
    while True:
        page = kp_admin.describe_topic_partitions([DTP_TOPIC, "kp-dtp-missing"], response_partition_limit=2,
                                                  cursor=cursor)
        pages.append([(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                      for t in page["topics"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # Sorted by name: the missing topic comes first, costs nothing, and is behind the cursor after.
    assert pages == [
        [("kp-dtp-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []), (DTP_TOPIC, 0, [0, 1])],
        [(DTP_TOPIC, 0, [2, 3])],
        [(DTP_TOPIC, 0, [4])],
    ]
    [topic] = kp_admin.describe_topic_partitions([DTP_TOPIC])["topics"]
    assert topic["topic_id"].int != 0 and topic["topic_authorized_operations"] > 0
    for part in topic["partitions"]:
        assert (part["leader_id"], part["replica_nodes"], part["isr_nodes"], part["offline_replicas"]) == (
            1, [1], [1], [])
        assert part["eligible_leader_replicas"] is None and part["last_known_elr"] is None  # empty lists


def test_describe_topic_partitions_all_topics_and_a_stray_cursor(bootstrap: str) -> None:
    """No topic named: every topic from the cursor's on. A cursor naming a topic the request does
    not name: INVALID_REQUEST for each named topic (Kafka's InvalidRequestException answer)."""
    with WireConnection(bootstrap) as conn:
        every = conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [], "response_partition_limit": 2000,
            "cursor": {"topic_name": "kp-dtp", "partition_index": 0}})
        names = [t.name for t in every.topics]
        assert names == sorted(names) and all(n >= "kp-dtp" for n in names) and every.next_cursor is None
        stray = conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": "b-topic"}], "response_partition_limit": 10,
            "cursor": {"topic_name": "a-topic", "partition_index": 0}})
        assert [(t.name, t.error_code, t.partitions) for t in stray.topics] == [
            ("b-topic", ErrorCode.INVALID_REQUEST, [])]
