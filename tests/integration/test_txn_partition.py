"""Transactions on the partition side, against a real server over raw sockets (and librdkafka):
WriteTxnMarkers, read_committed Fetch (LSO, aborted_transactions), ListOffsets, DescribeProducers,
the `.txnindex` across restarts. The coordinator's APIs are driven by hand here, as a
coordinator would send them (the coordinator's own tests live with it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from raftka.client.protocol import ApiKey
from raftka.log.record_batch import Record, encode_batch, iter_batches
from tests.compat.server_process import ServerProcess
from tests.compat.wire_client import WireConnection, values_batch
from tests.support import wait_until

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServerProcess(tmp_path_factory.mktemp("txn-partition"), properties={
        # The transaction coordinator is not what these tests drive: producers here are
        # "added" by hand, so the leader must not ask it (KIP-890 verification has its own test).
        "transaction.partition.verification.enable": "false",
        "offsets.topic.num.partitions": "1",  # every group's offsets in __consumer_offsets-0
    })
    process.start()
    yield process
    process.stop()


@pytest.fixture
def conn(server):
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as connection:
        yield connection


def txn_records(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    return encode_batch([Record(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=True)


def produce_txn(conn: WireConnection, topic: str, records: bytes, transactional_id: str = "tx") -> int:
    response = conn.request(ApiKey.PRODUCE, 8, {
        "transactional_id": transactional_id, "acks": -1, "timeout_ms": 15000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return response.responses[0].partition_responses[0].error_code


def write_marker(conn: WireConnection, pid: int, epoch: int, commit: bool, topic: str, *,
                 coordinator_epoch: int = 0, partitions: tuple[int, ...] = (0,), version: int = 1) -> dict[int, int]:
    response = conn.request(ApiKey.WRITE_TXN_MARKERS, version, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": list(partitions)}]}]})
    return {p.partition_index: p.error_code for p in response.markers[0].topics[0].partitions}


def fetch(conn: WireConnection, topic: str, offset: int, isolation: int):
    body = conn.fetch_request_body(topic, 0, offset)
    body["isolation_level"] = isolation
    return conn.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]


def latest(conn: WireConnection, topic: str, isolation: int, timestamp: int = -1) -> int:
    """ListOffsets v5: `latest` (-1) by default, else the first offset at or after `timestamp`."""
    response = conn.request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    result = response.topics[0].partitions[0]
    assert result.error_code == 0
    return result.offset


def consume_values(bootstrap: str, topic: str, isolation: str, until: bytes) -> list[bytes]:
    """Every value librdkafka delivers from the start of partition 0 until `until` arrives."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while until not in values:
            assert time.monotonic() < deadline, f"{isolation}: {until!r} not consumed; got {values}"
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_abort_is_skipped_by_read_committed_and_seen_by_read_uncommitted(server, conn) -> None:
    topic = "txn-abort"
    assert conn.create_topic(topic) == 0
    pid, epoch = conn.init_producer_id()
    assert produce_txn(conn, topic, txn_records([b"a1", b"a2"], pid, epoch, 0)) == 0  # offsets 0-1
    assert write_marker(conn, pid, epoch, False, topic) == {0: 0}  # 2: ABORT
    assert conn.produce(topic, 0, values_batch([b"plain"])).error_code == 0  # 3
    assert produce_txn(conn, topic, txn_records([b"c1"], pid, epoch, 2)) == 0  # 4
    assert write_marker(conn, pid, epoch, True, topic) == {0: 0}  # 5: COMMIT
    assert conn.produce(topic, 0, values_batch([b"end"])).error_code == 0  # 6

    committed = fetch(conn, topic, 0, READ_COMMITTED)
    assert committed.error_code == 0
    assert committed.last_stable_offset == committed.high_watermark == 7
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(pid, 0)]
    uncommitted = fetch(conn, topic, 0, READ_UNCOMMITTED)
    assert uncommitted.aborted_transactions is None
    assert latest(conn, topic, READ_COMMITTED) == 7

    # A fetch from after the aborted transaction's marker no longer names it.
    assert list(fetch(conn, topic, 3, READ_COMMITTED).aborted_transactions) == []

    assert consume_values(server.bootstrap, topic, "read_committed", b"end") == [b"plain", b"c1", b"end"]
    assert consume_values(server.bootstrap, topic, "read_uncommitted", b"end") == [
        b"a1", b"a2", b"plain", b"c1", b"end"]


def test_open_transaction_holds_back_the_lso(server, conn) -> None:
    topic = "txn-lso"
    assert conn.create_topic(topic) == 0
    assert conn.produce(topic, 0, values_batch([b"before"])).error_code == 0  # 0
    pid, epoch = conn.init_producer_id()
    assert produce_txn(conn, topic, txn_records([b"t1"], pid, epoch, 0)) == 0  # 1: open
    late = 4_102_444_800_000  # a timestamp only the next record has
    assert conn.produce(topic, 0, encode_batch([Record(None, b"after", timestamp=late)])).error_code == 0  # 2

    assert latest(conn, topic, READ_UNCOMMITTED) == 3
    assert latest(conn, topic, READ_COMMITTED) == 1
    # By timestamp: read_committed finds only what lies below the LSO.
    assert latest(conn, topic, READ_UNCOMMITTED, timestamp=late) == 2
    assert latest(conn, topic, READ_COMMITTED, timestamp=late) == -1
    held = fetch(conn, topic, 0, READ_COMMITTED)
    assert (held.high_watermark, held.last_stable_offset) == (3, 1)
    assert [r.value for b in iter_batches(bytes(held.records)) for r in b.records] == [b"before"]
    assert fetch(conn, topic, 1, READ_COMMITTED).records in (b"", None)

    # A plain batch from the producer with the open transaction is refused (48).
    assert conn.produce(topic, 0, values_batch([b"x"], producer_id=pid, producer_epoch=epoch,
                                               base_sequence=1)).error_code == 48
    assert write_marker(conn, pid, epoch, True, topic) == {0: 0}  # 3: COMMIT
    assert latest(conn, topic, READ_COMMITTED) == 4
    assert consume_values(server.bootstrap, topic, "read_committed", b"after") == [b"before", b"t1", b"after"]


def test_marker_errors(server, conn) -> None:
    topic = "txn-marker-errors"
    assert conn.create_topic(topic) == 0
    pid, _ = conn.init_producer_id()
    assert produce_txn(conn, topic, txn_records([b"v"], pid, 2, 0)) == 0
    assert write_marker(conn, pid, 2, True, topic, coordinator_epoch=5) == {0: 0}
    assert write_marker(conn, pid, 1, False, topic, coordinator_epoch=5) == {0: 47}  # older epoch
    assert write_marker(conn, pid, 2, False, topic, coordinator_epoch=4) == {0: 52}  # older coordinator
    assert write_marker(conn, pid, 2, False, topic, partitions=(7,)) == {7: 3}  # no such partition
    assert write_marker(conn, pid, 2, False, "no-such-topic") == {0: 3}
    assert write_marker(conn, pid, 3, False, topic, coordinator_epoch=5, version=0) == {0: 0}  # v0, newer epoch
    # A transactional batch without a transactional id is refused as Kafka does.
    assert conn.produce(topic, 0, txn_records([b"w"], pid, 3, 0)).error_code == 53


def test_describe_producers(server, conn) -> None:
    topic = "txn-describe"
    assert conn.create_topic(topic) == 0
    pid, epoch = conn.init_producer_id()
    assert produce_txn(conn, topic, txn_records([b"v", b"w"], pid, epoch, 0)) == 0
    response = conn.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [0, 9]}]})
    found, missing = response.topics[0].partitions
    assert (found.error_code, missing.error_code) == (0, 3)
    [producer] = found.active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.last_sequence,
            producer.current_txn_start_offset) == (pid, epoch, 1, 0)
    assert write_marker(conn, pid, epoch, False, topic) == {0: 0}


def txn_offset_commit(conn: WireConnection, group: str, pid: int, epoch: int, topic: str, offset: int, *,
                      generation: int = -1, member: str = "", version: int = 3, tid: str = "tx") -> int:
    response = conn.request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": generation, "member_id": member, "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return response.topics[0].partitions[0].error_code


def committed(conn: WireConnection, group: str, topic: str) -> int:
    response = conn.fetch_offsets(group, topic, [0])
    assert response.error_code == 0
    return response.topics[0].partitions[0].committed_offset


def fetch_stable(conn: WireConnection, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable: (partition error, committed offset)."""
    response = conn.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": True, "topics": [{"name": topic, "partition_indexes": [0]}]})
    result = response.topics[0].partitions[0]
    return result.error_code, result.committed_offset


def ready_coordinator(conn: WireConnection, group: str) -> None:
    wait_until(lambda: conn.find_coordinator(group).error_code == 0
               and conn.fetch_offsets(group, "any", [0]).error_code == 0,  # 14 while it loads
               timeout=TIMEOUT, what=f"the coordinator of {group} is loaded")


def test_txn_offsets_wait_for_their_marker(server, conn) -> None:
    topic, group = "txn-offsets", "g-txn"
    assert conn.create_topic(topic) == 0
    ready_coordinator(conn, group)
    pid, epoch = conn.init_producer_id()
    assert txn_offset_commit(conn, group, pid, epoch, topic, 5) == 0
    assert committed(conn, group, topic) == -1  # pending until the marker
    assert fetch_stable(conn, group, topic) == (88, -1)  # UNSTABLE_OFFSET_COMMIT: retry later
    assert write_marker(conn, pid, epoch, True, "__consumer_offsets") == {0: 0}
    assert committed(conn, group, topic) == 5
    assert fetch_stable(conn, group, topic) == (0, 5)
    assert txn_offset_commit(conn, group, pid, epoch, topic, 9, version=0) == 0
    assert write_marker(conn, pid, epoch, False, "__consumer_offsets") == {0: 0}
    assert committed(conn, group, topic) == 5  # aborted: dropped
    # KIP-447 fencing against the (empty) group: a member it does not know, another generation.
    assert txn_offset_commit(conn, group, pid, epoch, topic, 7, member="m-1", generation=1) == 25
    assert txn_offset_commit(conn, group, pid, epoch, topic, 7, generation=3) == 22
    # A marker at a newer epoch (the coordinator fenced the producer): the old epoch gets 47.
    assert write_marker(conn, pid, epoch + 1, False, "__consumer_offsets") == {0: 0}
    assert txn_offset_commit(conn, group, pid, epoch, topic, 7) == 47
    assert committed(conn, group, topic) == 5


def test_pending_txn_offsets_survive_a_coordinator_reload(server) -> None:
    topic, group = "txn-offsets-reload", "g-reload"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        assert conn.create_topic(topic) == 0
        ready_coordinator(conn, group)
        pid, epoch = conn.init_producer_id()
        assert txn_offset_commit(conn, group, pid, epoch, topic, 11) == 0
    server.stop()
    server.start()
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready_coordinator(conn, group)
        assert committed(conn, group, topic) == -1
        assert write_marker(conn, pid, epoch, True, "__consumer_offsets") == {0: 0}
        assert committed(conn, group, topic) == 11


def test_txn_index_survives_a_restart_and_is_rebuilt_when_deleted(server) -> None:
    topic = "txn-restart"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        assert conn.create_topic(topic) == 0
        pid, epoch = conn.init_producer_id()
        assert produce_txn(conn, topic, txn_records([b"gone"], pid, epoch, 0)) == 0
        assert write_marker(conn, pid, epoch, False, topic) == {0: 0}
        assert conn.produce(topic, 0, values_batch([b"end"])).error_code == 0
    index_files = list(Path(server.directory).rglob(f"{topic}-0/*.txnindex"))
    assert [p.stat().st_size for p in index_files] == [34]

    def aborted_after_restart() -> list[tuple[int, int]]:
        server.stop()
        server.start()
        with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
            result = None

            def served() -> bool:
                nonlocal result
                result = fetch(conn, topic, 0, READ_COMMITTED)
                return result.error_code == 0 and result.high_watermark == 3

            wait_until(served, timeout=TIMEOUT, what=f"{topic} is served again after the restart")
            return [(t.producer_id, t.first_offset) for t in result.aborted_transactions]

    assert aborted_after_restart() == [(pid, 0)]
    server.stop()
    index_files[0].unlink()
    assert aborted_after_restart() == [(pid, 0)]
    assert index_files[0].stat().st_size == 34
