"""The newest request versions raftka serves, on a real socket to a real `raftka server start`:
each answers as Kafka 4.4 does (the same steps against Kafka itself: tests/differential/wire_steps.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection, values_batch
from tests.support import wait_until

ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("newest-versions")) as process:
        yield process


@pytest.fixture
def conn(server: ServerProcess) -> Iterator[WireConnection]:
    with WireConnection(server.bootstrap) as connection:
        yield connection


def _api_versions_v5(conn: WireConnection, cluster_id: str | None, node_id: int):
    return conn.request(ApiKey.API_VERSIONS, 5, {"client_software_name": "wire-test",
                                                 "client_software_version": "1",
                                                 "cluster_id": cluster_id, "node_id": node_id})


def test_metadata_v13_and_the_api_versions_v5_target_check(conn: WireConnection) -> None:
    metadata = conn.request(ApiKey.METADATA, 13, {"topics": None})
    assert metadata.error_code == 0
    cluster, node = metadata.cluster_id, metadata.brokers[0].node_id
    for cluster_id, node_id, code in ((None, -1, 0), (cluster, node, 0),
                                      ("not-" + cluster, node, ErrorCode.REBOOTSTRAP_REQUIRED),
                                      (cluster, node + 1, ErrorCode.REBOOTSTRAP_REQUIRED),
                                      (cluster, -1, ErrorCode.INVALID_REQUEST),
                                      (None, node, ErrorCode.INVALID_REQUEST)):
        answer = _api_versions_v5(conn, cluster_id, node_id)
        assert answer.error_code == code, (cluster_id, node_id)
        assert bool(answer.api_keys) == (code == 0)
    # REBOOTSTRAP_REQUIRED leaves the connection open, as in Kafka 4.4.
    assert conn.request(ApiKey.METADATA, 13, {"topics": []}).error_code == 0


def _coordinator_ready(conn: WireConnection, group: str) -> None:
    """FindCoordinator answers and the coordinator has loaded (DescribeGroups is not 14/15/16)."""
    loading = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
    wait_until(lambda: conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code == 0
               and conn.request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]}).groups[0].error_code not in loading,
               timeout=60, what=f"the coordinator of {group!r}")


def test_delete_groups_v3(conn: WireConnection) -> None:
    assert conn.create_topic("nv-dg") == 0
    for group in ("nv-empty", "nv-busy"):
        _coordinator_ready(conn, group)
    committed = conn.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "nv-empty", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": "nv-dg", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                     "committed_metadata": ""}]}]})
    assert committed.topics[0].partitions[0].error_code == 0
    joined = conn.request(ApiKey.JOIN_GROUP, 3, {
        "group_id": "nv-busy", "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}, timeout=40)
    assert joined.error_code == 0
    answer = conn.request(ApiKey.DELETE_GROUPS, 3, {"groups_names": ["nv-empty", "nv-busy", "nv-none", "",
                                                                     "nv-empty"]})
    # As Kafka 4.4: a repeated id answered once, the empty id not found, and no message for any
    # of these outcomes (tests/differential/wire_steps.py runs the same against Kafka).
    assert [(r.group_id, r.error_code, r.error_message) for r in answer.results] == [
        ("nv-empty", 0, None), ("nv-busy", ErrorCode.NON_EMPTY_GROUP, None),
        ("nv-none", ErrorCode.GROUP_ID_NOT_FOUND, None), ("", ErrorCode.GROUP_ID_NOT_FOUND, None)]


def _create_topics(conn: WireConnection, version: int, topics: list[dict], validate_only: bool = False):
    return conn.request(ApiKey.CREATE_TOPICS, version, {"timeout_ms": 15000, "validate_only": validate_only,
                                                        "topics": [{"num_partitions": -1, "replication_factor": -1,
                                                                    "assignments": [], "configs": [], **t}
                                                                   for t in topics]}).topics


def _described(conn: WireConnection, topic: str) -> list[tuple[str, str | None, int]]:
    [result] = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}).results
    return sorted((c.name, c.value, c.config_source) for c in result.configs)


@pytest.mark.parametrize("version", [5, 6, 7])
def test_create_topics_v5_to_v7_answer_the_new_topic(conn: WireConnection, version: int) -> None:
    """KIP-525: the created topic's layout and every config with its source, as DescribeConfigs
    then describes it; v7 its id, as Metadata then names it (Kafka 4.4: wire_steps.py)."""
    name = f"nv-ct{version}"
    created, bad = _create_topics(conn, version, [
        {"name": name, "num_partitions": 2, "configs": [{"name": "retention.ms", "value": "1000"}]},
        {"name": f"nv-bad{version}", "configs": [{"name": "retention.ms", "value": "abc"}]}])
    assert (created.error_code, created.num_partitions, created.replication_factor) == (0, 2, 1)
    assert ("retention.ms", "1000", 1) in {(c.name, c.value, c.config_source) for c in created.configs}
    assert sorted((c.name, c.value, c.config_source) for c in created.configs) == _described(conn, name)
    assert not any(c.read_only or c.is_sensitive for c in created.configs)
    [metadata] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": name}]}).topics
    assert created.topic_id == (metadata.topic_id if version >= 7 else ZERO_UUID)
    assert (bad.error_code, bad.num_partitions, bad.replication_factor, bad.configs, bad.topic_id) == (
        ErrorCode.INVALID_CONFIG, -1, -1, [], ZERO_UUID)


def test_create_topics_v7_validate_only_answers_a_fresh_id_and_creates_nothing(conn: WireConnection) -> None:
    [checked] = _create_topics(conn, 7, [{"name": "nv-validate",
                                          "assignments": [{"partition_index": 0, "broker_ids": [1]},
                                                          {"partition_index": 1, "broker_ids": [1]}]}],
                               validate_only=True)
    assert (checked.error_code, checked.num_partitions, checked.replication_factor) == (0, 2, 1)
    assert checked.topic_id != ZERO_UUID and checked.configs
    [metadata] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": "nv-validate"}], "allow_auto_topic_creation": False}).topics
    assert metadata.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_refuses_a_repeated_name_once_and_creates_neither(conn: WireConnection, version: int) -> None:
    """As Kafka 4.4 (ControllerApis.createTopics; wire_steps.py runs the same against Kafka): a
    name given twice gets one INVALID_REQUEST answer and is not created; the others are."""
    answers = _create_topics(conn, version, [{"name": f"nv-dup{version}", "num_partitions": 1},
                                             {"name": f"nv-dup-ok{version}", "num_partitions": 1},
                                             {"name": f"nv-dup{version}", "num_partitions": 1}])
    assert [(t.name, t.error_code, t.error_message) for t in answers] == [
        (f"nv-dup{version}", ErrorCode.INVALID_REQUEST, "Duplicate topic name."), (f"nv-dup-ok{version}", 0, None)]
    [metadata] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": f"nv-dup{version}"}],
                                                    "allow_auto_topic_creation": False}).topics
    assert metadata.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _topic_id(conn: WireConnection, name: str) -> uuid.UUID:
    [topic] = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False}).topics
    return topic.topic_id


def test_delete_topics_v5_answers_kafka_s_message_per_topic(conn: WireConnection) -> None:
    assert conn.create_topic("nv-del5") == 0
    answer = conn.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["nv-del5", "nv-missing", ""], "timeout_ms": 15000})
    assert [(r.name, r.error_code, r.error_message) for r in answer.responses] == [
        ("nv-del5", 0, None),
        ("nv-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        ("", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]


def test_delete_topics_v6_by_id_or_name(conn: WireConnection) -> None:
    for name in ("nv-del6-id", "nv-del6-name"):
        assert conn.create_topic(name) == 0
    by_id, by_name = _topic_id(conn, "nv-del6-id"), _topic_id(conn, "nv-del6-name")
    unknown = uuid.UUID(int=5)
    answer = conn.request(ApiKey.DELETE_TOPICS, 6, {"timeout_ms": 15000, "topics": [
        {"name": None, "topic_id": by_id}, {"name": "nv-del6-name", "topic_id": ZERO_UUID},
        {"name": None, "topic_id": unknown}, {"name": "nv-x", "topic_id": unknown},
        {"name": None, "topic_id": ZERO_UUID}]})
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in answer.responses] == [
        ("nv-del6-id", by_id, 0, None), ("nv-del6-name", by_name, 0, None),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        ("nv-x", unknown, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")]
    wait_until(lambda: all(_topic_id(conn, n) == ZERO_UUID for n in ("nv-del6-id", "nv-del6-name")),
               what="both topics gone from Metadata")


def _begin(conn: WireConnection, transactional_id: str) -> None:
    """InitProducerId for `transactional_id` (its coordinator found and loaded): state Empty."""
    def initialized() -> bool:
        if conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1}).error_code:
            return False
        return conn.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}).error_code == 0
    wait_until(initialized, timeout=60, what=f"InitProducerId for {transactional_id!r}")


@pytest.mark.parametrize(("pattern", "states", "code", "listed", "unknown"), [
    (None, [], 0, ["nv-other", "nv-tx-1", "nv-tx-22"], []),
    ("", [], 0, ["nv-other", "nv-tx-1", "nv-tx-22"], []),
    ("nv-tx-.*", ["bogus", "Empty"], 0, ["nv-tx-1", "nv-tx-22"], ["bogus"]),
    ("nv-tx", [], 0, [], []),                           # the whole id must match
    ("nv-tx-\\d", [], 0, ["nv-tx-1"], []),
    ("\\Qnv-tx-1\\E", [], 0, ["nv-tx-1"], []),           # RE2's literal run
    ("(?=nv)", ["bogus"], ErrorCode.INVALID_REGULAR_EXPRESSION, [], []),  # RE2 has no lookahead
    ("[", [], ErrorCode.INVALID_REGULAR_EXPRESSION, [], []),
    (None, ["bogus"], 0, [], ["bogus"]),                # unknown states only: none match
])
def test_list_transactions_v2_filters_by_an_re2_pattern(conn: WireConnection, pattern, states, code, listed,
                                                        unknown) -> None:
    for transactional_id in ("nv-tx-1", "nv-tx-22", "nv-other"):
        _begin(conn, transactional_id)
    answer = conn.request(ApiKey.LIST_TRANSACTIONS, 2, {"state_filters": states, "producer_id_filters": [],
                                                         "duration_filter": -1, "transactional_id_pattern": pattern})
    assert answer.error_code == code
    assert sorted(t.transactional_id for t in answer.transaction_states if t.transactional_id.startswith("nv-")) \
        == listed
    assert answer.unknown_state_filters == unknown


def test_list_offsets_special_timestamps_from_their_versions(conn: WireConnection) -> None:
    """Each special timestamp from the version that introduced it (-3 v7, -4 v8, -5 v9, -6 v11);
    before, and any other negative one, UNSUPPORTED_VERSION; -6 is -1 without tiered storage."""
    assert conn.create_topic("nv-lo") == 0
    assert conn.produce("nv-lo", 0, values_batch([b"a", b"b", b"c"])).error_code == 0
    first = {-3: 7, -4: 8, -5: 9, -6: 11}
    for version in (1, 6, 7, 8, 9, 10, 11):
        for timestamp in (-1, -2, -3, -4, -5, -6, -7, -100):
            [topic] = conn.request(ApiKey.LIST_OFFSETS, version, {
                "replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [{"name": "nv-lo", "partitions": [
                    {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]}).topics
            [partition] = topic.partitions
            served = timestamp in (-1, -2) or version >= first.get(timestamp, 99)
            assert partition.error_code == (0 if served else ErrorCode.UNSUPPORTED_VERSION), (version, timestamp)
            if timestamp == -6 and served:
                assert (partition.offset, partition.timestamp, partition.leader_epoch) == (-1, -1, -1)


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("newest-acls"), properties={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}) as process:
        yield process


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acls_v0_to_v3_take_the_user_resource_type(acl_server: ServerProcess, version: int) -> None:
    """As Kafka 4.4 (run with an authorizer): USER (7) ACLs in every version; an empty message
    on success from DescribeAcls and CreateAcls, null from DeleteAcls."""
    user = f"nv-bob{version}"
    with WireConnection(acl_server.bootstrap) as acls:
        created = acls.request(ApiKey.CREATE_ACLS, version, {"creations": [{
            "resource_type": 7, "resource_name": user, "resource_pattern_type": 3, "principal": "User:alice",
            "host": "*", "operation": 2, "permission_type": 3}]})
        assert [(r.error_code, r.error_message) for r in created.results] == [(0, "")]
        described = acls.request(ApiKey.DESCRIBE_ACLS, version, {
            "resource_type_filter": 7, "resource_name_filter": user, "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        assert (described.error_code, described.error_message) == (0, "")
        assert [(r.resource_type, r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
            (7, user, ["User:alice"])]
        deleted = acls.request(ApiKey.DELETE_ACLS, version, {"filters": [{
            "resource_type_filter": 7, "resource_name_filter": user, "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]})
        [result] = deleted.filter_results
        assert (result.error_code, result.error_message, len(result.matching_acls)) == (0, None, 1)


def test_describe_log_dirs_v5_answers_not_cordoned(conn: WireConnection) -> None:
    assert conn.create_topic("nv-ld") == 0
    answer = conn.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": [{"topic": "nv-ld", "partitions": [0]}]})
    [log_dir] = answer.results
    assert (answer.error_code, log_dir.error_code, log_dir.is_cordoned) == (0, 0, False)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in log_dir.topics] == [("nv-ld", [0])]
