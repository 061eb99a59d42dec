"""raftka's pytest plugin (raftka/testing/pytest_plugin.py), used as its users use it.

The fixtures below come from the installed plugin itself (the `pytest11`
entry point); nothing in this suite's conftest defines them. Sessions of
their own (ini options, a test that stops the node) run in a pytest
subprocess through `pytester`.
"""

from __future__ import annotations

import textwrap

import pytest
from confluent_kafka import Producer

from raftka import TopicPartition
from raftka.client.blocking import Consumer


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    errors = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(25) == 0
    assert errors == [None]


def test_bootstrap_takes_auto_created_topics(raftka_bootstrap):
    """Kafka's auto.create.topics.enable: producing to any name just works."""
    _produce(raftka_bootstrap, "plugin-auto-created", b"hello")
    with Consumer(raftka_bootstrap) as consumer:
        tp = TopicPartition("plugin-auto-created", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        records = consumer.poll(timeout_ms=10_000)
    assert [r.value for r in records[tp]] == [b"hello"]


def test_topic_factory_gives_fresh_names(raftka_topic, raftka_cluster):
    first, second = raftka_topic(partitions=3), raftka_topic(config={"cleanup.policy": "compact"})
    assert first != second and "test_topic_factory_gives_fresh_names" in first
    with raftka_cluster.admin() as admin:
        described = {d.name: d for d in admin.describe_topics([first, second])}
    assert len(described[first].partitions) == 3
    assert len(described[second].partitions) == 1


@pytest.mark.raftka(nodes=3)
def test_marker_asks_for_three_nodes_and_failover(raftka_cluster, raftka_topic):
    assert raftka_cluster.nodes == [1, 2, 3]
    topic = raftka_topic(replication_factor=3)
    _produce(raftka_cluster.bootstrap, topic, b"before")
    with raftka_cluster.admin() as admin:
        (desc,) = admin.describe_topics([topic])
    leader = desc.partitions[0].leader
    raftka_cluster.kill_node(leader)
    _produce(raftka_cluster.bootstrap, topic, b"after")  # a new leader took over
    raftka_cluster.start_node(leader)
    with Consumer(raftka_cluster.bootstrap) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        values = []
        for _ in range(20):
            values += [r.value for r in consumer.poll(timeout_ms=1000).get(tp, [])]
            if len(values) >= 2:
                break
    assert values == [b"before", b"after"]


def test_ini_options_and_a_node_stopped_by_one_test_is_back_for_the_next(pytester: pytest.Pytester):
    pytester.makeini(textwrap.dedent("""
        [pytest]
        raftka_config =
            num.partitions=4
            log.retention.ms=123456
    """))
    pytester.makepyfile(test_app=textwrap.dedent("""
        from raftka import Producer

        def test_a_stops_the_node(raftka_cluster):
            raftka_cluster.stop_node(1)

        def test_b_finds_it_running_with_the_ini_settings(raftka_cluster):
            with Producer(raftka_cluster.bootstrap) as producer:
                producer.send_and_wait("auto", b"v")  # auto-created with num.partitions
            with raftka_cluster.admin() as admin:
                brokers = admin.describe_cluster().brokers
                (desc,) = admin.describe_topics(["auto"])
            assert [b.node_id for b in brokers] == [1]
            assert len(desc.partitions) == 4
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_bad_marker_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_bad=textwrap.dedent("""
        import pytest

        @pytest.mark.raftka(node=3)
        def test_typo(raftka_bootstrap):
            pass
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert "unknown argument(s) ['node']" in result.stdout.str()
