"""Topic ids on the wire: Metadata v10+ gives each topic the image's id (new on every
re-creation, the same after a restart), and Fetch v13+ names topics by id, answering
UNKNOWN_TOPIC_ID for an id the broker does not know (a deleted or re-created topic)."""

from __future__ import annotations

import uuid

from raftka.client.protocol import ApiKey, ErrorCode
from raftka.log.record_batch import iter_batches
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection, batch_values, values_batch

ZERO = uuid.UUID(int=0)


def topic_id(conn: WireConnection, name: str, version: int = 12) -> uuid.UUID:
    response = conn.request(ApiKey.METADATA, version, {
        "topics": [{"name": name}], "allow_auto_topic_creation": False})
    (topic,) = response.topics
    assert topic.error_code == 0, f"metadata for {name}: error {topic.error_code}"
    return topic.topic_id


def fetch_by_id(conn: WireConnection, tid: uuid.UUID, version: int, offset: int = 0):
    body = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "session_epoch": -1,
            "topics": [{"topic_id": tid, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}
    if version >= 15:
        body["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
    else:
        body["replica_id"] = -1
    (topic,) = conn.request(ApiKey.FETCH, version, body).responses
    return topic


def delete_topic(conn: WireConnection, name: str) -> None:
    response = conn.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [name], "timeout_ms": 15000})
    assert response.responses[0].error_code == 0


def test_fetch_by_topic_id_and_unknown_ids(bootstrap: str) -> None:
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic("x-topic-ids") == 0
        assert conn.produce("x-topic-ids", 0, values_batch([b"a", b"b"])).error_code == 0
        tid = topic_id(conn, "x-topic-ids")
        assert tid != ZERO and tid == topic_id(conn, "x-topic-ids", version=10)
        for version in (13, 14, 15, 16):
            topic = fetch_by_id(conn, tid, version)
            assert topic.topic_id == tid
            (part,) = topic.partitions
            assert part.error_code == 0 and part.high_watermark == 2
            assert batch_values(list(iter_batches(bytes(part.records)))) == [b"a", b"b"]
        stranger = uuid.uuid4()
        topic = fetch_by_id(conn, stranger, 16)
        assert (topic.topic_id, topic.partitions[0].error_code) == (stranger, ErrorCode.UNKNOWN_TOPIC_ID)
        # Metadata by id (v12: the name is null).
        response = conn.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": tid, "name": None},
                                                                 {"topic_id": stranger, "name": None}],
                                                      "allow_auto_topic_creation": False})
        by_id = {t.topic_id: t for t in response.topics}
        assert by_id[tid].name == "x-topic-ids" and by_id[tid].error_code == 0
        assert by_id[stranger].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        response = conn.request(ApiKey.METADATA, 10, {"topics": [{"topic_id": stranger, "name": None}],
                                                      "allow_auto_topic_creation": False})
        assert [(t.name, t.error_code) for t in response.topics] == [("", ErrorCode.UNKNOWN_TOPIC_ID)]

        delete_topic(conn, "x-topic-ids")
        assert conn.create_topic("x-topic-ids") == 0
        renewed = topic_id(conn, "x-topic-ids")
        assert renewed not in (ZERO, tid), "a re-created topic needs a new id"
        assert fetch_by_id(conn, tid, 13).partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_topic_id_survives_a_restart(tmp_path) -> None:
    with running_server(tmp_path) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic("x-kept-id") == 0
            before = topic_id(conn, "x-kept-id")
        server.stop()
        server.start()
        with WireConnection(server.bootstrap) as conn:
            assert topic_id(conn, "x-kept-id") == before
