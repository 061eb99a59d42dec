"""ACLs end to end with real clients (kafka-python, confluent-kafka) and `raftka acls`.

Authentication is not part of this server, so every client is `User:ANONYMOUS` (the principal of
a PLAINTEXT connection): the ACLs allow or deny User:ANONYMOUS. The server runs the
StandardAuthorizer with `allow.everyone.if.no.acl.found=true` (so the first CreateAcls is
allowed), and `ALLOW User:ANONYMOUS ALL` on the cluster, every topic and every group comes
first: each test's DENY then takes away exactly what it denies. The named-user decisions are the
tables of tests/unit/test_acl_authorizer.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
)
from confluent_kafka.admin import ResourcePatternType as CKPattern
from confluent_kafka.admin import ResourceType as CKResource
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kp_errors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from raftka.cli.main import main as cli
from raftka.raft_meta.security.authorizer import STANDARD_AUTHORIZER
from tests.compat.server_process import ServerProcess, running_server
from tests.support import wait_until

pytestmark = pytest.mark.timeout(180)
ANON = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("acl-broker"), properties={
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "allow.everyone.if.no.acl.found": "true",
    }) as server:
        # ALLOW ALL on everything first: a resource with any ACL denies what no ACL allows
        # (allow.everyone.if.no.acl.found only covers resources with no ACL at all).
        _wait_all(_ck_admin(server).create_acls([
            AclBinding(kind, name, CKPattern.LITERAL, ANON, "*", AclOperation.ALL, AclPermissionType.ALLOW)
            for kind, name in ((CKResource.BROKER, "kafka-cluster"), (CKResource.TOPIC, "*"),
                               (CKResource.GROUP, "*"))]))
        yield server
        _ADMINS.pop(server.bootstrap, None)


def _wait_all(futures: dict) -> list:
    return [f.result(timeout=30) for f in futures.values()]


_ADMINS: dict[str, AdminClient] = {}


def _ck_admin(server: ServerProcess) -> AdminClient:
    """One AdminClient per server, kept alive: its futures fail with _DESTROY once it is collected."""
    if server.bootstrap not in _ADMINS:
        _ADMINS[server.bootstrap] = AdminClient({"bootstrap.servers": server.bootstrap})
    return _ADMINS[server.bootstrap]


def _deny(server: ServerProcess, kind, name: str, op, pattern=CKPattern.LITERAL) -> AclBinding:
    binding = AclBinding(kind, name, pattern, ANON, "*", op, AclPermissionType.DENY)
    _wait_all(_ck_admin(server).create_acls([binding]))
    return binding


def _create_topic(server: ServerProcess, name: str) -> None:
    from confluent_kafka.admin import NewTopic

    _wait_all(_ck_admin(server).create_topics([NewTopic(name, 1, 1)], operation_timeout=30))


def _ck_deliver(server: ServerProcess, topic: str, **config) -> CKError | None:
    producer = CKProducer({"bootstrap.servers": server.bootstrap, "message.timeout.ms": 20000, **config})
    outcome: list = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def test_without_an_authorizer_acl_apis_answer_security_disabled(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        with pytest.raises(kp_errors.SecurityDisabledError):
            admin.describe_acls(ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                          permission_type=ACLPermissionType.ANY,
                                          resource_pattern=ResourcePattern(ResourceType.TOPIC, "x")))
    finally:
        admin.close()


def test_produce_denied_then_allowed_once_the_deny_is_deleted(secured: ServerProcess) -> None:
    _create_topic(secured, "acl-w")
    binding = _deny(secured, CKResource.TOPIC, "acl-w", AclOperation.WRITE)
    error = _ck_deliver(secured, "acl-w")
    assert error is not None and error.code() == CKError.TOPIC_AUTHORIZATION_FAILED
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap, max_block_ms=20000, request_timeout_ms=20000)
    try:
        with pytest.raises(kp_errors.TopicAuthorizationFailedError):
            producer.send("acl-w", b"v").get(timeout=30)
    finally:
        producer.close(timeout=5)
    deleted = _wait_all(_ck_admin(secured).delete_acls([AclBindingFilter(
        CKResource.TOPIC, "acl-w", CKPattern.LITERAL, ANON, None, AclOperation.WRITE, AclPermissionType.DENY)]))
    assert deleted == [[binding]]
    assert _ck_deliver(secured, "acl-w") is None


def test_prefixed_deny_read_fails_fetch_but_not_describe(secured: ServerProcess) -> None:
    _create_topic(secured, "acl-r-1")
    assert _ck_deliver(secured, "acl-r-1") is None
    _deny(secured, CKResource.TOPIC, "acl-r-", AclOperation.READ, CKPattern.PREFIXED)
    consumer = CKConsumer({"bootstrap.servers": secured.bootstrap, "group.id": "acl-r-reader",
                           "enable.auto.commit": False})
    try:
        from confluent_kafka import TopicPartition as CKTopicPartition

        consumer.assign([CKTopicPartition("acl-r-1", 0, 0)])
        seen = wait_until(lambda: (lambda m: m.error() if m is not None and m.error() else None)(
            consumer.poll(1.0)), timeout=30, what="a fetch error")
        assert seen.code() == CKError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    consumer = KafkaConsumer(bootstrap_servers=secured.bootstrap, request_timeout_ms=20000)
    try:
        # DENY READ does not deny DESCRIBE: the topic is still visible.
        assert "acl-r-1" in consumer.topics()
        consumer.assign([TopicPartition("acl-r-1", 0)])
        consumer.seek(TopicPartition("acl-r-1", 0), 0)
        with pytest.raises(kp_errors.TopicAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # poll raises the fetch's error
                assert not consumer.poll(timeout_ms=1000), "records from a topic READ is denied on"
    finally:
        consumer.close()


def test_metadata_hides_topics_the_principal_may_not_describe(secured: ServerProcess) -> None:
    _create_topic(secured, "acl-hidden")
    _create_topic(secured, "acl-shown")
    _deny(secured, CKResource.TOPIC, "acl-hidden", AclOperation.DESCRIBE, CKPattern.PREFIXED)
    topics = _ck_admin(secured).list_topics(timeout=20).topics
    assert "acl-shown" in topics and "acl-hidden" not in topics
    # Named: the authorization error, whether the topic exists or not (existence is not revealed).
    for name in ("acl-hidden", "acl-hidden-never-created"):
        named = _ck_admin(secured).list_topics(name, timeout=20).topics[name]
        assert named.error is not None and named.error.code() == CKError.TOPIC_AUTHORIZATION_FAILED, name


def test_group_read_denied(secured: ServerProcess) -> None:
    _create_topic(secured, "acl-g-topic")
    _deny(secured, CKResource.GROUP, "acl-g", AclOperation.READ)
    consumer = CKConsumer({"bootstrap.servers": secured.bootstrap, "group.id": "acl-g",
                           "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["acl-g-topic"])
        seen = wait_until(lambda: (lambda m: m.error() if m is not None and m.error() else None)(
            consumer.poll(1.0)), timeout=30, what="a group error")
        assert seen.code() == CKError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_kafka_python_admin_and_cli_round_trip(secured: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap, request_timeout_ms=20000)
    try:
        acl = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-acl", ACLResourcePatternType.PREFIXED))
        assert admin.create_acls([acl])["succeeded"] == [acl]
        found, _ = admin.describe_acls(ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                                 permission_type=ACLPermissionType.ANY,
                                                 resource_pattern=ResourcePatternFilter(
                                                     ResourceType.TOPIC, "kp-acl-x", ACLResourcePatternType.MATCH)))
        assert found == [acl]
    finally:
        admin.close()
    runner = CliRunner()
    listed = runner.invoke(cli, ["acls", "list", "--bootstrap-server", secured.bootstrap, "--principal", "User:alice"])
    assert listed.exit_code == 0, listed.output
    assert "name=kp-acl, patternType=PREFIXED" in listed.output
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed.output
    added = runner.invoke(cli, ["acls", "add", "--bootstrap-server", secured.bootstrap, "--allow-principal",
                                "User:bob", "--consumer", "--topic", "cli-t", "--group", "cli-g"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(cli, ["acls", "list", "--bootstrap-server", secured.bootstrap, "--principal", "User:bob"])
    assert listed.output.count("principal=User:bob") == 3  # READ + DESCRIBE on the topic, READ on the group
    removed = runner.invoke(cli, ["acls", "remove", "--bootstrap-server", secured.bootstrap, "--topic", "cli-t",
                                  "--group", "cli-g", "--force"])
    assert removed.exit_code == 0 and "Removed 3 ACL(s)" in removed.output, removed.output


def test_acls_survive_a_restart(secured: ServerProcess, tmp_path: Path) -> None:
    binding = _deny(secured, CKResource.TOPIC, "acl-kept", AclOperation.ALTER)
    secured.stop()
    secured.start()
    found = _ck_admin(secured).describe_acls(AclBindingFilter(
        CKResource.TOPIC, "acl-kept", CKPattern.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=30)
    assert found == [binding]


def test_each_api_answers_kafkas_code_on_the_wire(secured: ServerProcess) -> None:
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection

    for name in ("acl-wire", "acl-wire-ro"):
        _create_topic(secured, name)
    assert _ck_deliver(secured, "acl-wire-ro") is None
    _deny(secured, CKResource.TOPIC, "acl-wire", AclOperation.ALL)  # DENY ALL: DESCRIBE too
    _deny(secured, CKResource.TOPIC, "acl-wire-ro", AclOperation.READ)
    _deny(secured, CKResource.GROUP, "acl-wire-g", AclOperation.DESCRIBE)
    _deny(secured, CKResource.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)
    _deny(secured, CKResource.BROKER, "kafka-cluster", AclOperation.DELETE)  # else it grants every topic's DELETE
    topic_denied, group_denied, cluster_denied = 29, 30, 31
    with WireConnection(secured.bootstrap) as wire:
        assert wire.list_offset("acl-wire", 0).error_code == topic_denied
        assert wire.list_offset("acl-wire-ro", 0).error_code == 0  # READ denied, DESCRIBE not
        assert wire.fetch("acl-wire-ro", 0, 0).error_code == topic_denied
        assert wire.commit_offsets("acl-wire-ok", "acl-wire-ro", {0: 1}) == {0: topic_denied}  # READ on the topic
        assert wire.find_coordinator("acl-wire-ok").error_code == 0  # creates __consumer_offsets
        fetched = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(
            wire.fetch_offsets("acl-wire-ok", "acl-wire", [0])), timeout=30, what="the group coordinator")
        part = fetched.topics[0].partitions[0]
        assert (fetched.error_code, part.error_code, part.committed_offset) == (0, topic_denied, -1)
        assert wire.fetch_offsets("acl-wire-g", "acl-wire-ro", [0]).error_code == group_denied
        assert wire.find_coordinator("acl-wire-g").error_code == group_denied
        deleted = wire.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": ["acl-wire", "acl-wire-none"],
                                                         "timeout_ms": 15000})
        assert {r.name: r.error_code for r in deleted.responses} == {"acl-wire": topic_denied,
                                                                     "acl-wire-none": 3}
        grown = wire.request(ApiKey.CREATE_PARTITIONS, 1, {"topics": [{"name": "acl-wire", "count": 2,
                                                                       "assignments": None}],
                                                           "timeout_ms": 15000, "validate_only": True})
        assert grown.results[0].error_code == topic_denied
        configs = wire.request(ApiKey.DESCRIBE_CONFIGS, 3, {"resources": [
            {"resource_type": 2, "resource_name": "acl-wire", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "acl-wire-ro", "configuration_keys": ["cleanup.policy"]},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        assert [r.error_code for r in configs.results] == [topic_denied, 0, cluster_denied]


def test_reassignment_and_unregister_need_alter_or_describe_on_the_cluster(secured: ServerProcess) -> None:
    """Kafka's rules: AlterPartitionReassignments and UnregisterBroker need ALTER on the cluster,
    ListPartitionReassignments DESCRIBE on the cluster. The denials name host 127.0.0.2 (the wire
    client connects from there), so this module's admin on 127.0.0.1 may still manage ACLs."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection

    cluster_denied = 31
    denies = [AclBinding(CKResource.BROKER, "kafka-cluster", CKPattern.LITERAL, ANON, "127.0.0.2", op,
                         AclPermissionType.DENY) for op in (AclOperation.ALTER, AclOperation.DESCRIBE)]
    _wait_all(_ck_admin(secured).create_acls(denies))
    try:
        with WireConnection(secured.bootstrap, source_host="127.0.0.2") as wire:
            altered = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 15000, "topics": [
                {"name": "x", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
            assert (altered.error_code, altered.responses) == (cluster_denied, [])
            listed = wire.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 15000, "topics": None})
            assert listed.error_code == cluster_denied
            gone = wire.request(ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 7})
            assert gone.error_code == cluster_denied
        with WireConnection(secured.bootstrap) as wire:  # from 127.0.0.1: allowed, Kafka's own errors
            listed = wire.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 15000, "topics": None})
            assert (listed.error_code, listed.topics) == (0, [])
            gone = wire.request(ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 7})
            assert gone.error_code == 102  # BROKER_ID_NOT_REGISTERED
            altered = wire.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 15000, "topics": [
                {"name": "x", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
            assert altered.error_code == 0 and altered.responses[0].partitions[0].error_code == 3
    finally:
        _wait_all(_ck_admin(secured).delete_acls([AclBindingFilter(
            CKResource.BROKER, "kafka-cluster", CKPattern.LITERAL, ANON, "127.0.0.2", d.operation,
            AclPermissionType.DENY) for d in denies]))


def test_transactional_ids_need_write_and_describe(secured: ServerProcess) -> None:
    """InitProducerId needs WRITE on the transactional id, FindCoordinator and
    DescribeTransactions DESCRIBE: 53 (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) without."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection

    # As the fixture does for topics and groups: ALLOW ALL first, so each DENY takes away what it names.
    _wait_all(_ck_admin(secured).create_acls([AclBinding(
        CKResource.TRANSACTIONAL_ID, "*", CKPattern.LITERAL, ANON, "*", AclOperation.ALL, AclPermissionType.ALLOW)]))
    _deny(secured, CKResource.TRANSACTIONAL_ID, "acl-txn-ro", AclOperation.WRITE)
    _deny(secured, CKResource.TRANSACTIONAL_ID, "acl-txn-hidden", AclOperation.DESCRIBE)
    denied = 53

    def find(wire, tid):
        return wire.request(ApiKey.FIND_COORDINATOR, 2, {"key": tid, "key_type": 1}).error_code

    def init(wire, tid):
        return wire.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": tid,
                                                         "transaction_timeout_ms": 60000}).error_code

    def describe(wire, tid):
        [state] = wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states
        return state.error_code

    with WireConnection(secured.bootstrap) as wire:
        wait_until(lambda: find(wire, "acl-txn-ok") == 0, timeout=60, what="the transaction coordinator")
        wait_until(lambda: init(wire, "acl-txn-ok") == 0, timeout=60, what="an allowed InitProducerId")
        assert find(wire, "acl-txn-ro") == 0  # DESCRIBE is not denied
        assert init(wire, "acl-txn-ro") == denied
        assert find(wire, "acl-txn-hidden") == denied
        assert describe(wire, "acl-txn-hidden") == denied
        assert describe(wire, "acl-txn-ok") == 0
        listed = wire.request(ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
        assert "acl-txn-ok" in {t.transactional_id for t in listed.transaction_states}


def test_describe_topic_partitions_hides_or_refuses_what_may_not_be_described(secured: ServerProcess) -> None:
    """DescribeTopicPartitions needs DESCRIBE on the topic: the all-topics form leaves a denied one
    out; named, it answers TOPIC_AUTHORIZATION_FAILED with a zero id, existing or not."""
    from raftka.client.protocol import ApiKey
    from tests.compat.wire_client import WireConnection

    for name in ("dtp-hidden", "dtp-shown"):
        _create_topic(secured, name)
    _deny(secured, CKResource.TOPIC, "dtp-hidden", AclOperation.DESCRIBE, CKPattern.PREFIXED)
    with WireConnection(secured.bootstrap) as wire:
        # Every page of the all-topics form (other tests' topics, the internal ones' 50
        # partitions each among them, come first).
        listed, cursor = [], None
        for _ in range(100):
            page = wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 100,
                                                                      "cursor": cursor})
            listed += [t.name for t in page.topics]
            if page.next_cursor is None:
                cursor = None
                break
            cursor = {"topic_name": page.next_cursor.topic_name, "partition_index": page.next_cursor.partition_index}
        assert cursor is None, "still paging after 100 pages"
        assert "dtp-shown" in listed
        assert not [name for name in listed if name.startswith("dtp-hidden")]
        named = wire.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [
            {"name": "dtp-hidden"}, {"name": "dtp-hidden-never-created"}, {"name": "dtp-shown"}],
            "response_partition_limit": 100, "cursor": None})
    assert [(t.name, t.error_code, t.topic_id.int, len(t.partitions)) for t in named.topics] == [
        ("dtp-shown", 0, named.topics[0].topic_id.int, 1),
        ("dtp-hidden", 29, 0, 0), ("dtp-hidden-never-created", 29, 0, 0)]
    assert named.topics[0].topic_id.int != 0
