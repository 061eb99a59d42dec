"""The share coordinator over real sockets: one raftka server, the raw protocol
(FindCoordinator v6 key type 2, InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState v0-1, DeleteShareGroupState, ReadShareGroupStateSummary v0-1),
`__share_group_state` as Kafka creates it, and hostile input."""

from __future__ import annotations

import itertools
import uuid

import pytest

from raftka.broker.group.share_coordinator_state import READ_UNINITIALIZED
from raftka.broker.group.share_persister import ShareStateKey
from raftka.client.protocol import ApiKey, ErrorCode, encode_request
from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TOPIC = "share-data"
_groups = itertools.count()
STATE_APIS = (ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
              ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("sharecoord"), properties={
        "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.snapshot.update.records.per.snapshot": "2",
    }) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 2) == 0
        yield server


RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def ready(server, topic_id) -> None:
    """`__share_group_state` created (by FindCoordinator key type 2, as the persister's first
    lookup) and every one of its partitions loaded: no answer is retriable any more."""
    with WireConnection(server.bootstrap) as conn:
        keys = [ShareStateKey(f"ready-{i}", topic_id, 0) for i in range(30)]
        conn.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [keys[0].coordinator_key]})

        def loaded() -> bool:
            response = conn.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, {"group_id": "ready", "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
            codes = [call(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, k.group_id, topic_id, 0,
                          leader_epoch=0).error_code for k in keys]
            return response.results[0].partitions[0].error_code not in RETRIABLE and not set(codes) & RETRIABLE
        wait_until(loaded, timeout=30, interval=0.1, what="__share_group_state loaded")


@pytest.fixture
def conn(server, ready):
    with WireConnection(server.bootstrap) as conn:
        yield conn


@pytest.fixture(scope="module")
def topic_id(server) -> uuid.UUID:
    with WireConnection(server.bootstrap) as conn:
        meta = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": uuid.UUID(int=0)}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
    return meta.topics[0].topic_id


def new_group() -> str:
    return f"share-{next(_groups)}"


def call(conn, api: ApiKey, group: str, topic: uuid.UUID, partition: int, version: int = 0, **fields):
    """One partition's result of a state API."""
    response = conn.request(api, version, {"group_id": group, "topics": [
        {"topic_id": topic, "partitions": [{"partition": partition, **fields}]}]})
    (result,) = response.results
    assert result.topic_id == topic
    (part,) = result.partitions
    assert part.partition == partition
    return part


def batches(*rows: tuple[int, int, int, int]) -> list[dict]:
    return [{"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c} for f, last, s, c in rows]


def test_the_state_apis_are_advertised_as_kafka_4_4_does(conn):
    # On Kafka's broker listener, so Kafka 4.4 lists them in ApiVersions to clients too.
    versions = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert {k: advertised.get(k) for k in STATE_APIS} == {
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0), ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
        ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1), ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1)}
    assert advertised[ApiKey.FIND_COORDINATOR] == ADVERTISED_VERSIONS[ApiKey.FIND_COORDINATOR]
    assert ADVERTISED_VERSIONS[ApiKey.FIND_COORDINATOR][1] >= 6


def test_find_coordinator_key_type_2(server, conn, topic_id):
    key = ShareStateKey(new_group(), topic_id, 0).coordinator_key
    answer = conn.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key, "no-colons",
                                                                                            "g:notauuid:0"]})
    ok, bad, bad_id = answer.coordinators
    assert (ok.key, ok.error_code, ok.node_id) == (key, 0, 1)
    assert f"{ok.host}:{ok.port}" == server.bootstrap
    assert bad.error_code == bad_id.error_code == ErrorCode.INVALID_REQUEST
    # Key type 2 before v6: INVALID_REQUEST, as Kafka answers.
    old = conn.request(ApiKey.FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": [key]})
    assert old.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
    # The lookup created __share_group_state with Kafka's configs.
    configs = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": "__share_group_state", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    values = {c.name: c.value for c in configs.results[0].configs}
    assert values["cleanup.policy"] == "delete"
    assert values["retention.ms"] == "-1"
    assert values["min.insync.replicas"] == "1"  # 2, capped by the replication factor of one broker
    assert values["segment.bytes"] == "104857600"


def test_initialize_write_read_summary_delete(conn, topic_id):
    group = new_group()
    R = ApiKey.READ_SHARE_GROUP_STATE
    part = call(conn, R, group, topic_id, 0, leader_epoch=0)
    assert (part.error_code, part.error_message) == (ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
    summary = call(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group, topic_id, 0, version=1, leader_epoch=0)
    assert (summary.error_code, summary.start_offset, summary.state_epoch, summary.delivery_complete_count) == (
        0, -1, 0, -1)

    assert call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic_id, 0, state_epoch=1,
                start_offset=10).error_code == 0
    for version, rows in ((0, ((10, 12, 2, 1), (13, 13, 0, 1))), (1, ((13, 15, 4, 2),))):
        extra = {"delivery_complete_count": 3} if version else {}
        written = call(conn, ApiKey.WRITE_SHARE_GROUP_STATE, group, topic_id, 0, version=version, state_epoch=1,
                       leader_epoch=0, start_offset=10, state_batches=batches(*rows), **extra)
        assert written.error_code == 0, written.error_message
    part = call(conn, R, group, topic_id, 0, leader_epoch=0)
    assert (part.error_code, part.state_epoch, part.start_offset) == (0, 1, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in part.state_batches] == [
        (10, 12, 2, 1), (13, 15, 4, 2)]
    summary = call(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group, topic_id, 0, version=1, leader_epoch=0)
    assert (summary.error_code, summary.state_epoch, summary.start_offset, summary.delivery_complete_count) == (
        0, 1, 10, 3)

    # Fencing: a newer leader epoch is recorded by a read, an older one is refused; so is an
    # older state epoch after a re-initialize.
    assert call(conn, R, group, topic_id, 0, leader_epoch=4).error_code == 0
    assert call(conn, R, group, topic_id, 0, leader_epoch=3).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert call(conn, ApiKey.WRITE_SHARE_GROUP_STATE, group, topic_id, 0, state_epoch=1, leader_epoch=3,
                start_offset=10, state_batches=[]).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic_id, 0, state_epoch=0,
                start_offset=0).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic_id, 0, state_epoch=2,
                start_offset=20).error_code == 0
    assert call(conn, ApiKey.WRITE_SHARE_GROUP_STATE, group, topic_id, 0, state_epoch=1, leader_epoch=4,
                start_offset=20, state_batches=[]).error_code == ErrorCode.FENCED_STATE_EPOCH
    part = call(conn, R, group, topic_id, 0, leader_epoch=4)
    assert (part.state_epoch, part.start_offset, list(part.state_batches)) == (2, 20, [])

    assert call(conn, ApiKey.DELETE_SHARE_GROUP_STATE, group, topic_id, 0).error_code == 0
    part = call(conn, R, group, topic_id, 0, leader_epoch=4)
    assert (part.error_code, part.error_message) == (ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)


def test_unknown_topics_and_partitions_and_empty_requests(conn, topic_id):
    group = new_group()
    for topic, partition in ((uuid.uuid4(), 0), (topic_id, 2)):
        part = call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic, partition, state_epoch=0, start_offset=0)
        assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic_id, -1, state_epoch=0,
                start_offset=0).error_code == ErrorCode.INVALID_REQUEST
    # An empty group id, no topics or a topic without partitions: no results (Kafka's answer).
    for body in ({"group_id": "", "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0}]}]},
                 {"group_id": group, "topics": []},
                 {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": []}]}):
        assert list(conn.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, body).results) == []


def test_many_partitions_in_one_request_each_get_their_answer(conn, topic_id):
    group = new_group()
    other = uuid.uuid4()
    response = conn.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": p, "state_epoch": 0, "start_offset": p}
                                              for p in (0, 1, 5)]},
        {"topic_id": other, "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 0}]}]})
    got = {(r.topic_id, p.partition): p.error_code for r in response.results for p in r.partitions}
    assert got == {(topic_id, 0): 0, (topic_id, 1): 0, (topic_id, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   (other, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_hostile_input_closes_one_connection_and_a_huge_write_is_refused(server, conn, topic_id):
    group = new_group()
    assert call(conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, group, topic_id, 1, state_epoch=0,
                start_offset=0).error_code == 0
    # A write whose record would not fit a batch (message.max.bytes): an error answer, nothing kept.
    huge = batches(*((2 * i, 2 * i, 2, 1) for i in range(100_000)))
    part = call(conn, ApiKey.WRITE_SHARE_GROUP_STATE, group, topic_id, 1, state_epoch=0, leader_epoch=0,
                start_offset=0, state_batches=huge)
    assert part.error_code != 0
    assert list(call(conn, ApiKey.READ_SHARE_GROUP_STATE, group, topic_id, 1, leader_epoch=0).state_batches) == []
    # A truncated request body closes that connection only.
    frame = encode_request(ApiKey.WRITE_SHARE_GROUP_STATE, 1, 99, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 1, "state_epoch": 0, "leader_epoch": 0,
                                               "start_offset": 0, "state_batches": batches((0, 0, 2, 1))}]}]},
        client_id="hostile")
    body = frame[4:-6]
    with WireConnection(server.bootstrap) as hostile:
        hostile.send_bytes(len(body).to_bytes(4, "big") + body)
        assert hostile.wait_closed_by_broker() == b""
    assert call(conn, ApiKey.READ_SHARE_GROUP_STATE, group, topic_id, 1, leader_epoch=0).error_code == 0
