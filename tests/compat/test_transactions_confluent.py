"""confluent-kafka (librdkafka) transactions end to end (issue #16): the transactional producer
against raftka's transaction coordinator and partition leaders, seen by read_committed and
read_uncommitted consumers; zombie fencing; the coordinator's timeout abort; a coordinator
failover mid-transaction."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TIMEOUT = 60.0

# The partition side (transactional Produce, WriteTxnMarkers, read_committed Fetch) comes with it.
pytestmark = pytest.mark.skipif(ApiKey.WRITE_TXN_MARKERS not in ADVERTISED_VERSIONS,
                                reason="the partition side of transactions (WriteTxnMarkers) is not served")
_names = itertools.count()


@pytest.fixture(scope="module")
def txn_server(tmp_path_factory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("txn-confluent"), properties={
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    }) as server:
        yield server


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"cf-txn-{next(_names)}"
    with WireConnection(bootstrap.split(",")[0]) as conn:
        assert conn.create_topic(name, partitions) == 0
    return name


def producer(bootstrap: str, tid: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every value a consumer with `isolation` sees up to the end of each partition (the LSO
    under read_committed), in offset order per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{isolation}",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": isolation, "enable.auto.commit": False})
    values: list[bytes] = []
    eof: set[int] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"no end of {topic} after {TIMEOUT}s ({values})"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_commit_and_abort_as_read_committed_and_read_uncommitted_consumers_see_them(txn_server):
    bootstrap = txn_server.bootstrap
    topic = new_topic(bootstrap)
    p = producer(bootstrap, f"{topic}-tid")
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for v in (b"c1", b"c2"):
        p.produce(topic, v, partition=0)
    p.commit_transaction(TIMEOUT)
    p.begin_transaction()
    for v in (b"a1", b"a2"):
        p.produce(topic, v, partition=0)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, b"c3", partition=0)
    p.commit_transaction(TIMEOUT)
    assert read_all(bootstrap, topic, "read_committed") == [b"c1", b"c2", b"c3"]
    assert read_all(bootstrap, topic, "read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"c3"]


def test_a_second_producer_on_the_same_id_fences_the_zombie(txn_server):
    bootstrap = txn_server.bootstrap
    topic = new_topic(bootstrap)
    tid = f"{topic}-tid"
    zombie = producer(bootstrap, tid)
    zombie.init_transactions(TIMEOUT)
    zombie.begin_transaction()
    zombie.produce(topic, b"z1", partition=0)
    zombie.flush(TIMEOUT)
    successor = producer(bootstrap, tid)
    successor.init_transactions(TIMEOUT)  # aborts the zombie's transaction at a bumped epoch
    zombie.produce(topic, b"z2", partition=0)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort(), raised.value
    successor.begin_transaction()
    successor.produce(topic, b"s1", partition=0)
    successor.commit_transaction(TIMEOUT)
    assert read_all(bootstrap, topic, "read_committed") == [b"s1"]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(txn_server):
    bootstrap = txn_server.bootstrap
    topic = new_topic(bootstrap)
    tid = f"{topic}-tid"
    p = producer(bootstrap, tid, **{"transaction.timeout.ms": 2000})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, b"late", partition=0)
    p.flush(TIMEOUT)
    with WireConnection(bootstrap) as conn:
        def state():
            [s] = conn.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states
            return s.transaction_state
        wait_until(lambda: state() == "CompleteAbort", timeout=TIMEOUT, what="the coordinator's timeout abort")
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)
    assert read_all(bootstrap, topic, "read_committed") == []
    assert read_all(bootstrap, topic, "read_uncommitted") == [b"late"]


def test_a_coordinator_failover_mid_transaction(tmp_path):
    """Kill -9 the broker leading the transaction's `__transaction_state` partition between
    produce and commit: librdkafka finds the new coordinator, which loaded the transaction,
    and the commit lands whole."""
    from tests.integration.cluster_support import bootstrap_of, running_cluster

    with running_cluster(tmp_path, 3, extra={"transaction.state.log.num.partitions": "1"}) as cluster:
        topic = "cf-txn-failover"
        cluster.create_topic(topic, 2, 3)
        tid = "cf-failover-tid"
        p = producer(cluster.bootstrap_servers, tid)
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"before-{i}".encode(), partition=i % 2)
        p.flush(TIMEOUT)
        with WireConnection(cluster.nodes[1].bootstrap) as conn:
            found = conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": tid, "key_type": 1})
            assert found.error_code == 0
        cluster.kill(found.node_id)
        for i in range(4):
            p.produce(topic, f"after-{i}".encode(), partition=i % 2)
        p.commit_transaction(TIMEOUT)
        live = bootstrap_of(cluster)
        got = read_all(live, topic, "read_committed", partitions=2)
        assert sorted(got) == sorted([f"before-{i}".encode() for i in range(4)]
                                     + [f"after-{i}".encode() for i in range(4)])
