"""KIP-890 part 1 against the real transaction coordinator: a partition leader appends a
producer's first transactional batch only if the coordinator says the partition was added to
its transaction, so a write that arrives after its transaction's ABORT cannot hang."""

from __future__ import annotations

import pytest

from raftka.client.protocol import ApiKey
from raftka.log.record_batch import Record, encode_batch
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection
from tests.integration.test_txn_coordinator import add, end, init, ready
from tests.integration.test_txn_partition import committed, txn_offset_commit
from tests.support import wait_until

TOPIC = "verified"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("txn-verify"), num_partitions=2, properties={
        "transaction.state.log.num.partitions": "1",
    }) as server:
        with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
            assert conn.create_topic(TOPIC, 2) == 0
        yield server


def produce(conn: WireConnection, tid: str, partition: int, pid: int, epoch: int, seq: int) -> int:
    batch = encode_batch([Record(None, b"v%d" % seq)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=True)
    response = conn.request(ApiKey.PRODUCE, 8, {
        "transactional_id": tid, "acks": -1, "timeout_ms": 15000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    return response.responses[0].partition_responses[0].error_code


def lso(conn: WireConnection, partition: int) -> tuple[int, int]:
    body = conn.fetch_request_body(TOPIC, partition, 0)
    body["isolation_level"] = 1
    result = conn.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
    return result.high_watermark, result.last_stable_offset


def test_only_added_partitions_take_transactional_writes(server) -> None:
    tid = "verified-txn"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready(conn, tid)
        response = init(conn, tid, version=1)
        assert response.error_code == 0
        pid, epoch = response.producer_id, response.producer_epoch
        assert produce(conn, tid, 0, pid, epoch, 0) == 48  # never added: INVALID_TXN_STATE
        assert add(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
        assert produce(conn, tid, 0, pid, epoch, 0) == 0
        assert produce(conn, tid, 0, pid, epoch, 1) == 0  # open there: no second question
        assert produce(conn, tid, 1, pid, epoch, 0) == 48  # the other partition was not added
        assert produce(conn, tid, 0, pid + 1000, epoch, 0) in (47, 48)  # another producer's id
        assert end(conn, tid, pid, epoch, False) == 0
        # The coordinator's ABORT marker closes the transaction; a late batch cannot reopen it.
        wait_until(lambda: lso(conn, 0)[0] == 3 and lso(conn, 0)[1] == 3, timeout=TIMEOUT,
                   what="the ABORT marker written and the LSO past it")
        assert produce(conn, tid, 0, pid, epoch, 2) == 48
        assert lso(conn, 0) == (3, 3)


def test_txn_offset_commit_needs_add_offsets_to_txn(server) -> None:
    tid, group = "verified-offsets", "verified-group"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready(conn, tid)
        wait_until(lambda: conn.find_coordinator(group).error_code == 0, timeout=TIMEOUT, what="a group coordinator")
        response = init(conn, tid, version=1)
        pid, epoch = response.producer_id, response.producer_epoch
        wait_until(lambda: conn.fetch_offsets(group, TOPIC, [0]).error_code == 0, timeout=TIMEOUT,
                   what="the group coordinator's load")  # 14 while it loads
        assert txn_offset_commit(conn, group, pid, epoch, TOPIC, 4, tid=tid) == 48  # not added to the transaction
        added = conn.request(ApiKey.ADD_OFFSETS_TO_TXN, 0, {"transactional_id": tid, "producer_id": pid,
                                                           "producer_epoch": epoch, "group_id": group})
        assert added.error_code == 0
        assert txn_offset_commit(conn, group, pid, epoch, TOPIC, 4, tid=tid) == 0
        assert end(conn, tid, pid, epoch, True) == 0
        wait_until(lambda: committed(conn, group, TOPIC) == 4, timeout=TIMEOUT,
                   what="the COMMIT marker materialising the offset")
