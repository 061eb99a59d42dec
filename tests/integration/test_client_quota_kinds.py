"""request_percentage and controller_mutation_rate against a real one-node server, over real
sockets with the SDK's BrokerConnection (it sends a chosen API version and shows the raw
`throttle_time_ms`): KIP-599's THROTTLING_QUOTA_EXCEEDED from CreatePartitions v3, the throttle
of older versions, and the request quota's throttle, capped at one window."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest
import trio

from raftka.client.admin import QuotaFilter
from raftka.client.blocking import Admin
from raftka.client.connection import BrokerConnection
from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey, ErrorCode
from raftka.testing.local_cluster import LocalCluster
from tests.integration.test_metrics_endpoint import scrape, value

MUTATION_RATE = 1.0  # partitions/s: a bucket of 11 (controller.quota.window.num x size x rate)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    node = LocalCluster(tmp_path_factory.mktemp("quota-kinds"), 1, metrics=True, log_level="WARNING",
                        extra_config={"num.partitions": "1"})
    try:
        node.start_and_wait(30)
        yield node
    finally:
        node.stop(timeout=15)


@pytest.fixture(scope="module")
def bootstrap(cluster: LocalCluster) -> str:
    return cluster.bootstrap


def _set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    """Set it, and wait until the broker's image has it (describe answers from the image)."""
    admin = Admin(bootstrap)
    try:
        admin.alter_client_quotas({"client-id": client_id}, {key: value})
        for _ in range(200):
            found = admin.describe_client_quotas([QuotaFilter("client-id", client_id)], strict=True)
            if found and found[0][1].get(key) == value:
                return
        raise AssertionError(f"the broker never described {key} for {client_id}")
    finally:
        admin.close()


def _on_connection(bootstrap: str, client_id: str, calls: Callable[[BrokerConnection], Awaitable]):
    host, port = bootstrap.rsplit(":", 1)

    async def main():
        async with trio.open_nursery() as nursery:
            conn = await BrokerConnection.connect(nursery, host, int(port), client_id=client_id)
            try:
                return await calls(conn)
            finally:
                await conn.aclose()
                nursery.cancel_scope.cancel()

    return trio.run(main)


def _create(name: str, partitions: int) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}


def test_create_partitions_v3_is_refused_with_throttling_quota_exceeded_once_the_bucket_is_empty(bootstrap):
    """KIP-599's strict mode, with CreatePartitions v3 (CreateTopics v6: the next test)."""
    assert ADVERTISED_VERSIONS[ApiKey.CREATE_PARTITIONS][1] >= 3
    _set_quota(bootstrap, "mut-strict", "controller_mutation_rate", MUTATION_RATE)

    def grow(count: int) -> dict:
        return {"topics": [{"name": "strict-a", "count": count, "assignments": None}], "timeout_ms": 30000,
                "validate_only": False}

    async def calls(conn: BrokerConnection):
        created = await conn.request(ApiKey.CREATE_TOPICS, _create("strict-a", 1), version=4)  # 1 token
        first = await conn.request(ApiKey.CREATE_PARTITIONS, grow(13), version=3)  # 12 more: 10 -> -2
        second = await conn.request(ApiKey.CREATE_PARTITIONS, grow(14), version=3)
        before = trio.current_time()
        third = await conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False}, version=9)
        return created, first, second, third, trio.current_time() - before

    created, first, second, third, held = _on_connection(bootstrap, "mut-strict", calls)
    assert (created.topics[0].error_code, created.throttle_time_ms) == (0, 0)  # 10 tokens left
    # 12 partitions from a bucket of 10: accepted, and not throttled (a strict quota's rule)
    assert (first.results[0].error_code, first.throttle_time_ms) == (0, 0)
    result = second.results[0]
    assert (result.error_code, result.error_message) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                                         "The throttling quota has been exceeded.")
    assert 0 < second.throttle_time_ms <= 2000  # the bucket's -2 tokens at 1/s, less the time since
    assert held >= second.throttle_time_ms / 1000.0 * 0.9  # the connection was muted that long
    assert third.throttle_time_ms == 0


def test_create_topics_v6_is_refused_with_throttling_quota_exceeded_once_the_bucket_is_empty(bootstrap):
    """CreateTopics v6's strict quota, per topic in request order: a topic is accepted while the
    bucket is not below zero (even one that takes it below), the next is refused."""
    _set_quota(bootstrap, "mut-strict-ct", "controller_mutation_rate", MUTATION_RATE)

    async def calls(conn: BrokerConnection):
        first = await conn.request(ApiKey.CREATE_TOPICS, {**_create("strict6-a", 12), "topics": [
            *_create("strict6-a", 12)["topics"], *_create("strict6-b", 1)["topics"]]}, version=6)
        before = trio.current_time()
        metadata = await conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False}, version=9)
        return first, metadata, trio.current_time() - before

    first, metadata, held = _on_connection(bootstrap, "mut-strict-ct", calls)
    accepted, refused = first.topics
    assert (accepted.name, accepted.error_code) == ("strict6-a", 0)  # 12 from 11: accepted, -1 left
    assert (refused.name, refused.error_code, refused.error_message) == (
        "strict6-b", ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
    assert 0 < first.throttle_time_ms <= 1000  # 1 token over at 1/s
    assert held >= first.throttle_time_ms / 1000.0 * 0.9  # the connection was muted that long
    assert metadata.throttle_time_ms == 0


def test_delete_topics_v5_is_refused_with_throttling_quota_exceeded_once_the_bucket_is_empty(bootstrap):
    """DeleteTopics v5's strict quota: the topics are made by a client without a quota, then a
    deletion of 12 partitions takes the bucket of 11 below zero and the next topic is refused."""
    _set_quota(bootstrap, "mut-strict-dt", "controller_mutation_rate", MUTATION_RATE)

    async def make(conn: BrokerConnection):
        return [(await conn.request(ApiKey.CREATE_TOPICS, _create(name, count), version=4)).topics[0].error_code
                for name, count in (("del5-a", 12), ("del5-b", 1))]

    async def calls(conn: BrokerConnection):
        return await conn.request(ApiKey.DELETE_TOPICS, {"topic_names": ["del5-a", "del5-b"], "timeout_ms": 30000},
                                  version=5)

    assert _on_connection(bootstrap, "mut-none-dt", make) == [0, 0]
    answer = _on_connection(bootstrap, "mut-strict-dt", calls)
    assert [(r.name, r.error_code, r.error_message) for r in answer.responses] == [
        ("del5-a", 0, None),
        ("del5-b", ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")]
    assert 0 < answer.throttle_time_ms <= 1000  # 1 token over at 1/s


def test_create_topics_below_v6_is_accepted_throttled_and_the_connection_muted(bootstrap):
    _set_quota(bootstrap, "mut-old", "controller_mutation_rate", MUTATION_RATE)

    async def calls(conn: BrokerConnection):
        first = await conn.request(ApiKey.CREATE_TOPICS, _create("old-0", 12), version=4)
        before = trio.current_time()
        second = await conn.request(ApiKey.CREATE_TOPICS, _create("old-1", 12), version=4)
        return first, second, trio.current_time() - before

    first, second, held = _on_connection(bootstrap, "mut-old", calls)
    assert [first.topics[0].error_code, second.topics[0].error_code] == [0, 0]
    assert 0 < first.throttle_time_ms <= 1000  # 12 from a bucket of 11: 1 token over at 1/s
    assert held >= first.throttle_time_ms / 1000.0 * 0.9  # muted that long (KIP-219)
    assert 11000 <= second.throttle_time_ms <= 13000  # 13 tokens over, less the time since


def test_delete_topics_and_create_partitions_count_their_partitions(bootstrap):
    _set_quota(bootstrap, "mut-other", "controller_mutation_rate", MUTATION_RATE)

    async def calls(conn: BrokerConnection):
        created = await conn.request(ApiKey.CREATE_TOPICS, _create("grow", 1), version=4)
        grown = await conn.request(ApiKey.CREATE_PARTITIONS, {"topics": [
            {"name": "grow", "count": 12, "assignments": None}], "timeout_ms": 30000, "validate_only": False},
            version=1)
        deleted = await conn.request(ApiKey.DELETE_TOPICS, {"topic_names": ["grow"], "timeout_ms": 30000},
                                     version=3)
        return created, grown, deleted

    created, grown, deleted = _on_connection(bootstrap, "mut-other", calls)
    assert (created.topics[0].error_code, created.throttle_time_ms) == (0, 0)  # 1 of 11 tokens
    assert grown.results[0].error_code == 0
    assert 0 < grown.throttle_time_ms <= 1000  # 11 more: 1 token over
    assert deleted.responses[0].error_code == 0
    assert 11000 <= deleted.throttle_time_ms <= 13000  # its 12 partitions: 13 over


def _metadata_throttles(bootstrap: str, client_id: str, count: int) -> list[int]:
    async def calls(conn: BrokerConnection):
        out = []
        for _ in range(count):
            response = await conn.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                                          version=9)
            out.append(response.throttle_time_ms)
            if response.throttle_time_ms:  # the connection is muted from here: enough
                break
        return out

    return _on_connection(bootstrap, client_id, calls)


def test_request_percentage_throttles_a_clients_requests_for_at_most_one_window(cluster, bootstrap):
    # 0.01 % of a handler thread over 10 windows: 1 ms of handler time in all
    _set_quota(bootstrap, "req-quota", "request_percentage", 0.01)
    throttles = _metadata_throttles(bootstrap, "req-quota", 60)
    assert 0 < throttles[-1] <= 1000, throttles  # ClientRequestQuotaManager's cap: one quota window
    assert not any(_metadata_throttles(bootstrap, "req-free", 60))  # another client id: no quota
    sample = scrape(cluster.metrics_urls()[1])
    assert value(sample, "kafka_server_request_request_time", user="", client_id="req-quota") > 0  # recorded (its size is the machine's)
    assert value(sample, "kafka_server_request_throttle_time", user="", client_id="req-quota") > 0


def test_the_quota_sensors_are_in_the_metrics(cluster, bootstrap):
    _set_quota(bootstrap, "mut-metrics", "controller_mutation_rate", MUTATION_RATE)

    async def calls(conn: BrokerConnection):
        return await conn.request(ApiKey.CREATE_TOPICS, _create("metered", 12), version=4)

    assert _on_connection(bootstrap, "mut-metrics", calls).throttle_time_ms > 0
    sample = scrape(cluster.metrics_urls()[1])
    who = {"user": "", "client_id": "mut-metrics"}
    assert value(sample, "kafka_server_controllermutation_mutation_rate", **who) == pytest.approx(12 / 10, rel=0.2)
    assert -1.5 < value(sample, "kafka_server_controllermutation_tokens", **who) < 0  # 12 from 11, refilling
    assert value(sample, "kafka_server_controllermutation_throttle_time", **who) > 0
