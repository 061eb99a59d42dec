"""Kafka's per-request limits and truthful CreateTopics answers, on a real one-node server.

- One user operation (a CreateTopics or CreatePartitions request, or the topics one
  Metadata request auto-creates) may write at most MAX_RECORDS_PER_USER_OP (10 000)
  metadata records. Over it the whole request gets POLICY_VIOLATION, nothing is
  committed (the topic list and the metadata log's offset are unchanged) and the
  broker goes on serving. Before, each of these requests exhausted file descriptors or
  committed hundreds of MB of metadata and hung the broker.
- CreateTopics answers with the outcome of its commit: a 2000-partition topic on one
  node is answered with success however long it takes (it used to be answered
  NOT_CONTROLLER ... TIMEOUT although the topic existed afterwards).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from raftka import Admin, NewTopic
from raftka.client.errors import TopicAlreadyExistsError
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.raft_meta.controller.controller_decisions import MAX_RECORDS_PER_USER_OP
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection, batch_values, values_batch

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("op-limits")) as process:
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic("grow", 1) == 0
        yield process


def metadata_offset(server: ServerProcess) -> int:
    """The metadata log's committed offset, as `raftka quorum status --json` reports it."""
    out = subprocess.run([sys.executable, "-m", "raftka", "quorum", "status", "--bootstrap-server",
                          server.bootstrap, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["high_watermark"]


def topic_names(conn: WireConnection) -> set[str]:
    response = conn.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False})
    return {t.name for t in response.topics}


def create_topics(conn: WireConnection, *topics: tuple[str, int]) -> list:
    response = conn.request(ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []} for name, partitions in topics],
        "timeout_ms": 30_000, "validate_only": False}, timeout=60)
    return list(response.topics)


def assert_refused_over_the_cap(results: list) -> None:
    for result in results:
        assert result.error_code == ErrorCode.POLICY_VIOLATION, (result.name, result.error_code)
        assert "MAX_RECORDS_PER_USER_OP" in result.error_message and str(MAX_RECORDS_PER_USER_OP) in result.error_message


def assert_serving(conn: WireConnection, topic: str) -> None:
    """The broker still creates topics and takes and serves writes."""
    assert conn.create_topic(topic, 2) == 0
    result = conn.produce(topic, 1, values_batch([b"still", b"serving"]))
    assert result.error_code == 0
    assert batch_values(conn.read_all(topic, 1)) == [b"still", b"serving"]


def test_create_topics_over_the_cap_is_refused_whole_and_commits_nothing(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        names, offset = topic_names(conn), metadata_offset(server)
        assert_refused_over_the_cap(create_topics(conn, ("huge", 100_000)))
        # Kafka counts every topic of the request: two topics of 5 000 partitions (10 002 records)
        # are refused together, although each would fit alone.
        assert_refused_over_the_cap(create_topics(conn, ("half-a", 5_000), ("half-b", 5_000)))
        assert topic_names(conn) == names and metadata_offset(server) == offset
        assert server.running()
        assert_serving(conn, "after-create-topics")


def test_create_partitions_to_a_million_is_refused_and_commits_nothing(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        offset = metadata_offset(server)
        response = conn.request(ApiKey.CREATE_PARTITIONS, 1, {
            "topics": [{"name": "grow", "count": 1_000_000, "assignments": None}],
            "timeout_ms": 30_000, "validate_only": False}, timeout=60)
        assert_refused_over_the_cap(response.results)
        assert metadata_offset(server) == offset
        metadata = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": "grow"}], "allow_auto_topic_creation": False})
        assert len(metadata.topics[0].partitions) == 1
        assert_serving(conn, "after-create-partitions")


def test_a_metadata_request_auto_creating_10000_topics_creates_none(server: ServerProcess) -> None:
    unknown = [f"auto-{i:05d}" for i in range(10_000)]  # 2 records each (num.partitions=1): 20 000
    with WireConnection(server.bootstrap) as conn:
        names, offset = topic_names(conn), metadata_offset(server)
        response = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": n} for n in unknown],
                                                     "allow_auto_topic_creation": True}, timeout=60)
        assert [t.name for t in response.topics] == unknown
        assert {t.error_code for t in response.topics} == {ErrorCode.POLICY_VIOLATION}
        assert topic_names(conn) == names and metadata_offset(server) == offset
        # Under the cap, auto-creation works as before.
        response = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": "auto-small"}],
                                                     "allow_auto_topic_creation": True})
        assert response.topics[0].error_code == 0 and len(response.topics[0].partitions) == 1
        assert_serving(conn, "after-auto-create")


def test_a_2000_partition_topic_is_answered_with_success(tmp_path) -> None:
    with running_server(tmp_path) as server:
        offset = metadata_offset(server)
        # The commit (and the broker's work on 2000 new partitions) may take seconds: the
        # request waits for its outcome up to its timeout_ms (the admin's request timeout).
        with Admin(server.bootstrap, request_timeout_ms=180_000) as admin:
            admin.create_topics([NewTopic("wide", 2000, 1)])
            [described] = admin.describe_topics(["wide"])
            assert len(described.partitions) == 2000
            # A retry tells the truth: the topic exists, with the layout it has.
            with pytest.raises(TopicAlreadyExistsError, match="2000 partitions, replication factor 1"):
                admin.create_topics([NewTopic("wide", 2000, 1)])
        assert metadata_offset(server) > offset


def test_requests_to_a_broker_that_is_not_the_controller_go_over_the_control_rpc(tmp_path) -> None:
    """The same answers through the control RPC (a broker forwards to the active controller)."""
    from tests.integration.cluster_support import running_cluster

    with running_cluster(tmp_path, nodes=3) as cluster:
        with WireConnection(cluster.nodes[1].bootstrap) as conn:
            controller = conn.request(ApiKey.METADATA, 8, {"topics": None}).controller_id
        other = next(node for node_id, node in cluster.nodes.items() if node_id != controller)
        with WireConnection(other.bootstrap) as conn:
            assert_refused_over_the_cap(create_topics(conn, ("half-a", 5_000), ("half-b", 5_000)))
            # A name given twice is answered once, as Kafka 4.4 answers it.
            [twice, bad] = create_topics(conn, ("rpc-made", 3), ("rpc-made", 3), ("bad name", 1))
            assert (twice.name, twice.error_code) == ("rpc-made", ErrorCode.INVALID_REQUEST)
            assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            [made] = create_topics(conn, ("rpc-made", 3))
            assert made.error_code == 0
            [again] = create_topics(conn, ("rpc-made", 4))
            assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and "3 partitions" in again.error_message
            response = conn.request(ApiKey.CREATE_PARTITIONS, 1, {
                "topics": [{"name": "rpc-made", "count": 5, "assignments": None},
                           {"name": "rpc-missing", "count": 5, "assignments": None}],
                "timeout_ms": 30_000, "validate_only": False}, timeout=60)
            assert [r.error_code for r in response.results] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            response = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": "rpc-auto"}, {"name": "rpc-made"}],
                                                         "allow_auto_topic_creation": True}, timeout=60)
            assert [t.error_code for t in response.topics] == [0, 0]
            assert [len(t.partitions) for t in response.topics] == [1, 5]
