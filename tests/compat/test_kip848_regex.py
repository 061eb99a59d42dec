"""KIP-848 regular-expression subscriptions with confluent-kafka (librdkafka,
`group.protocol=consumer`, `subscribe(["^regex-.*"])`) against a real raftka server: the
coordinator resolves the regex (SubscribedTopicRegex) against the cluster's topics; a
matching topic created later is assigned without a restart, a deleted one is revoked;
ConsumerGroupDescribe and `raftka groups describe` show the member's regex; a regex RE2/J refuses is
INVALID_REGULAR_EXPRESSION (128)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from raftka.client.protocol import ApiKey, ErrorCode  # noqa: E402
from tests.compat.server_process import ServerProcess, server_with_topics  # noqa: E402
from tests.compat.wire_client import WireConnection  # noqa: E402
from tests.support import wait_until  # noqa: E402

GROUP = "kip848-regex"
# Kafka re-resolves a group's regexes for new topics at most every 10 s; heartbeats come every 5 s.
TIMEOUT = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with server_with_topics(tmp_path, {"regex-a": 2, "regex-b": 1, "other": 1, "xregex-a": 1}) as process:
        yield process


def assigned_topics(consumer: Consumer, expected: set[str]) -> bool:
    consumer.poll(0.1)
    return {tp.topic for tp in consumer.assignment()} == expected


def describe(conn: WireConnection):
    return conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [GROUP],
                                                            "include_authorized_operations": False}).groups[0]


def test_regex_subscription_follows_topics_created_and_deleted(server: ServerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.subscribe(["^regex-.*"])
        wait_until(lambda: assigned_topics(consumer, {"regex-a", "regex-b"}), TIMEOUT,
                   what="the regex's topics assigned")
        with WireConnection(server.bootstrap) as conn:
            group = describe(conn)
            assert group.error_code == 0
            [member] = group.members
            assert member.subscribed_topic_regex and "regex-" in member.subscribed_topic_regex, member
            assert {t.topic_name for t in member.assignment.topic_partitions} == {"regex-a", "regex-b"}
        # `raftka groups describe` shows the member's pattern as its subscription.
        ran = subprocess.run([sys.executable, "-m", "raftka", "groups", "describe", "--group", GROUP,
                              "--bootstrap-server", server.bootstrap], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        row = next(line.split() for line in ran.stdout.splitlines() if line.startswith(member.member_id)
                   and "TARGET" not in line and len(line.split()) == 9)
        assert row[-1] == f"regex:{member.subscribed_topic_regex}", ran.stdout

        [created] = admin.create_topics([confluent_kafka.admin.NewTopic("regex-c", 3, 1)]).values()
        created.result(30)
        wait_until(lambda: assigned_topics(consumer, {"regex-a", "regex-b", "regex-c"}), TIMEOUT,
                   what="the topic created later assigned")

        [deleted] = admin.delete_topics(["regex-a"]).values()
        deleted.result(30)
        wait_until(lambda: assigned_topics(consumer, {"regex-b", "regex-c"}), TIMEOUT,
                   what="the deleted topic revoked")
    finally:
        consumer.close()


def test_a_regex_re2_refuses_is_invalid_regular_expression(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        wait_until(lambda: conn.find_coordinator(GROUP).error_code == 0, TIMEOUT, what="a coordinator")

        def heartbeat():
            return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": GROUP, "member_id": "m-1", "member_epoch": 0, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": 30000, "subscribed_topic_names": [], "subscribed_topic_regex": "(?=x).*",
                "server_assignor": None, "topic_partitions": []})

        answer = wait_until(lambda: (r := heartbeat()).error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                            and r, TIMEOUT, what="an answer")
        assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION == 128
        assert answer.error_message == ("SubscribedTopicRegex `(?=x).*` is not a valid regular expression: "
                                        "invalid or unsupported Perl syntax: `(?=`.")
