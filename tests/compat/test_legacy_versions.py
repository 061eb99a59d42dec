"""The pre-KIP-896 versions raftka serves (client/protocol/legacy_versions.py), spoken by an
independent encoder: kafka-python's own structs for those versions (kafka.protocol.old),
framed and sent over a real socket to a real broker. Modern clients check the effects."""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.old import admin, commit, find_coordinator, list_offsets

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from tests.support import wait_until


class OldClient:
    """One socket; each call sends one kafka-python request struct and decodes its answer."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.correlation = 0

    def call(self, request, response_class):
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="old-client")
        self.sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        answer = response_class.decode(frame, header=True, framed=False)
        assert answer.header.correlation_id == self.correlation
        return answer.to_object()

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the broker closed the connection"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def old(bootstrap):
    client = OldClient(bootstrap)
    yield client
    client.close()


@pytest.mark.parametrize("key, floor", [
    (ApiKey.OFFSET_COMMIT, 0), (ApiKey.LIST_OFFSETS, 0), (ApiKey.DESCRIBE_CONFIGS, 0),
    (ApiKey.CREATE_TOPICS, 0), (ApiKey.DELETE_TOPICS, 0),
])
def test_the_floors_are_advertised(key, floor):
    assert ADVERTISED_VERSIONS[key][0] == floor


def test_create_list_commit_describe_delete_with_old_versions(old, bootstrap):
    topic = "legacy-a"
    # CreateTopics v0, then v1 with validate_only (nothing created) and its error message.
    created = old.call(admin.CreateTopicsRequest_v0(topics=[(topic, 1, 1, [], [])], timeout_ms=30000),
                       admin.CreateTopicsResponse_v0)
    assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(topic, 0)]
    checked = old.call(admin.CreateTopicsRequest_v1(topics=[("legacy-dry", 1, 1, [], [])], timeout_ms=30000,
                                                    validate_only=True), admin.CreateTopicsResponse_v1)
    assert checked["topics"][0]["error_code"] == 0
    again = old.call(admin.CreateTopicsRequest_v1(topics=[(topic, 1, 1, [], [])], timeout_ms=30000,
                                                  validate_only=False), admin.CreateTopicsResponse_v1)
    assert again["topics"][0]["error_code"] == 36 and again["topics"][0]["error_message"]  # TOPIC_ALREADY_EXISTS

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(30) == 0

    # ListOffsets v0 (Burrow): latest and earliest as one-element lists.
    def offsets(timestamp: int, max_num: int = 1) -> list[int]:
        answer = old.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[(topic, [(0, timestamp, max_num)])]),
                          list_offsets.ListOffsetsResponse_v0)
        (t,) = answer["topics"]
        (p,) = t["partitions"]
        assert p["error_code"] == 0
        return list(p["old_style_offsets"])
    assert offsets(-1) == [5]
    assert offsets(-2) == [0]
    assert offsets(-1, max_num=0) == []

    # OffsetCommit v0 (no generation) and v1 (Sarama's), read back by librdkafka.
    group = "legacy-g"
    # As any client: find the coordinator first (its first use creates __consumer_offsets),
    # retrying the retriable coordinator errors (14, 15, 16).
    wait_until(lambda: old.call(find_coordinator.FindCoordinatorRequest_v0(group),
                                find_coordinator.FindCoordinatorResponse_v0)["error_code"] == 0,
               timeout=60, interval=0.2, what="the group coordinator")
    v0 = wait_until(lambda: (lambda r: r if r["topics"][0]["partitions"][0]["error_code"] not in (14, 15, 16) else None)(
        old.call(commit.OffsetCommitRequest_v0(group_id=group, topics=[(topic, [(0, 3, "v0")])]),
                 commit.OffsetCommitResponse_v0)), timeout=60, interval=0.2, what="a v0 commit answered")
    assert v0["topics"][0]["partitions"][0]["error_code"] == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 3
        v1 = old.call(commit.OffsetCommitRequest_v1(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                    topics=[(topic, [(0, 4, -1, "v1")])]),
                      commit.OffsetCommitResponse_v1)
        assert v1["topics"][0]["partitions"][0]["error_code"] == 0
        assert consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == 4
    finally:
        consumer.close()
    # A commit for a member the group does not know is refused as in the later versions.
    stale = old.call(commit.OffsetCommitRequest_v1(group_id=group, generation_id_or_member_epoch=7, member_id="ghost",
                                                   topics=[(topic, [(0, 9, -1, "")])]),
                     commit.OffsetCommitResponse_v1)
    assert stale["topics"][0]["partitions"][0]["error_code"] != 0

    # DescribeConfigs v0: is_default instead of the config source.
    described = old.call(admin.DescribeConfigsRequest_v0(resources=[(2, topic, None)]),
                         admin.DescribeConfigsResponse_v0)
    (result,) = described["results"]
    assert result["error_code"] == 0
    configs = {c["name"]: c for c in result["configs"]}
    assert configs["cleanup.policy"]["value"] == "delete" and configs["cleanup.policy"]["is_default"] is True

    # DeleteTopics v0.
    deleted = old.call(admin.DeleteTopicsRequest_v0(topic_names=[topic], timeout_ms=30000),
                       admin.DeleteTopicsResponse_v0)
    assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [(topic, 0)]
    wait_until(lambda: offsets_gone(old, topic), timeout=30, what="the topic gone")


def offsets_gone(old: OldClient, topic: str) -> bool:
    answer = old.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[(topic, [(0, -1, 1)])]),
                      list_offsets.ListOffsetsResponse_v0)
    return answer["topics"][0]["partitions"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
