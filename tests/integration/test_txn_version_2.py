"""Transaction version 2 (KIP-890 part 2) and the transaction API versions that go with it,
on the wire against a real broker: Produce v10's leader hints (KIP-951), v11's
TRANSACTION_ABORTABLE, v12's implicit add, EndTxn v5's epoch bump per transaction,
TxnOffsetCommit v4/v5, and the finalized `transaction.version` 2; then Apache Kafka's own
Java producer (kafka-clients 4.4, tests/integration/java/TxnV2Producer.java) running
transactions at that level: commits read once by read_committed, aborts never."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from raftka.client.protocol import ApiKey
from raftka.log.record_batch import Record, encode_batch, iter_batches
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection, values_batch
from tests.differential.kafka_jars import TOOLS_LOG4J, java_binary, kafka_jars
from tests.integration.cluster_support import create_topic, partition_info, running_cluster
from tests.integration.test_txn_coordinator import add, describe, end, find, init, ready
from tests.integration.test_txn_partition import committed, ready_coordinator, txn_offset_commit
from tests.support import wait_until

TOPIC = "tv2"
TIMEOUT = 60.0
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TXN_STATE = 48
PRODUCER_FENCED = 90
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_ABORTABLE = 120
CONCURRENT_TRANSACTIONS = 51


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("txn-v2"), num_partitions=2, properties={
        "transaction.state.log.num.partitions": "1",
        "offsets.topic.num.partitions": "1",
    }) as server:
        with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
            assert conn.create_topic(TOPIC, 2) == 0
        yield server


def produce(conn: WireConnection, tid: str, partition: int, pid: int, epoch: int, seq: int, *, version: int,
            value: bytes = b"v") -> int:
    batch = encode_batch([Record(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=True)
    response = conn.request(ApiKey.PRODUCE, version, {
        "transactional_id": tid, "acks": -1, "timeout_ms": 15000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    return response.responses[0].partition_responses[0].error_code


def end_v5(conn: WireConnection, tid: str, pid: int, epoch: int, commit: bool):
    response = conn.request(ApiKey.END_TXN, 5, {"transactional_id": tid, "producer_id": pid,
                                                "producer_epoch": epoch, "committed": commit})
    return response.error_code, response.producer_id, response.producer_epoch


def committed_values(conn: WireConnection, partition: int, *, topic: str = TOPIC,
                     isolation: int = 1) -> list[bytes]:
    """read_committed values of `partition` (Fetch v11, isolation 1), aborted ones skipped."""
    body = conn.fetch_request_body(topic, partition, 0)
    body["isolation_level"] = isolation
    result = conn.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
    # The consumers' rule: a producer's batches from its aborted transaction's first offset
    # on are skipped until that producer's next control batch (its ABORT marker).
    pending = sorted((a.first_offset, a.producer_id) for a in result.aborted_transactions or [])
    aborting: set[int] = set()
    values = []
    for batch in iter_batches(result.records or b""):
        header = batch.header
        while pending and pending[0][0] <= header.base_offset:
            aborting.add(pending.pop(0)[1])
        if header.is_control:
            aborting.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in aborting):
            values.extend(r.value for r in batch.records)
    return values


def stable(conn: WireConnection, partition: int, *, topic: str = TOPIC) -> bool:
    body = conn.fetch_request_body(topic, partition, 0)
    body["isolation_level"] = 1
    result = conn.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
    return result.last_stable_offset == result.high_watermark


def test_transaction_version_2_is_finalized(server) -> None:
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        response = conn.request(ApiKey.API_VERSIONS, 4, {"client_software_name": "raftka-tests",
                                                         "client_software_version": "1.0"})
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert finalized["transaction.version"] == (2, 2) and supported["transaction.version"] == (0, 2)
    assert response.finalized_features_epoch > 0  # the Java client reads features only at a newer epoch


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(server) -> None:
    tid = "tv2-produce"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready(conn, tid)
        response = init(conn, tid, version=5)
        assert response.error_code == 0
        pid, epoch = response.producer_id, response.producer_epoch
        # Produce v10 (the KIP-890 part 1 check) refuses a partition never added; v11 tells it as
        # TRANSACTION_ABORTABLE; v12 adds it to the transaction itself.
        assert produce(conn, tid, 0, pid, epoch, 0, version=10) == INVALID_TXN_STATE
        assert produce(conn, tid, 0, pid, epoch, 0, version=11) == TRANSACTION_ABORTABLE
        assert produce(conn, tid, 0, pid, epoch, 0, version=12, value=b"c1") == 0
        assert produce(conn, tid, 1, pid, epoch, 0, version=12, value=b"c2") == 0
        state = describe(conn, tid)
        assert (state.transaction_state, state.producer_epoch) == ("Ongoing", epoch)
        assert sorted(p for t in state.topics for p in t.partitions) == [0, 1]
        # EndTxn v5: the commit bumps the epoch and says so; the retry gets the same answer.
        assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch + 1)
        assert end_v5(conn, tid, pid, epoch, True) in ((0, pid, epoch + 1), (51, -1, -1))
        wait_until(lambda: describe(conn, tid).transaction_state == "CompleteCommit", timeout=TIMEOUT,
                   what="the commit's markers")
        assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch + 1)
        # The markers carried the new epoch: the old one is fenced on the partition too.
        assert produce(conn, tid, 0, pid, epoch, 1, version=12) in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED)
        # The next transaction, at the new epoch from sequence 0; then an abort.
        epoch += 1
        assert produce(conn, tid, 0, pid, epoch, 0, version=12, value=b"a1") == 0
        assert end_v5(conn, tid, pid, epoch, False) == (0, pid, epoch + 1)
        wait_until(lambda: describe(conn, tid).transaction_state == "CompleteAbort" and stable(conn, 0),
                   timeout=TIMEOUT, what="the abort's markers")
        assert committed_values(conn, 0) == [b"c1"] and committed_values(conn, 1) == [b"c2"]
        # An abort of a transaction that added nothing is a real one at version 2 (a bump), a
        # commit of nothing INVALID_TXN_STATE; EndTxn v4 is the classic protocol (no bump).
        epoch += 1
        assert end_v5(conn, tid, pid, epoch, True) == (INVALID_TXN_STATE, -1, -1)
        assert end_v5(conn, tid, pid, epoch, False) == (0, pid, epoch + 1)
        wait_until(lambda: describe(conn, tid).transaction_state == "CompleteAbort", timeout=TIMEOUT,
                   what="the empty abort's completion")
        epoch += 1
        assert add(conn, tid, pid, epoch, [(TOPIC, 1)]) == {(TOPIC, 1): 0}
        assert end(conn, tid, pid, epoch, True, version=4) == 0
        wait_until(lambda: describe(conn, tid).transaction_state == "CompleteCommit", timeout=TIMEOUT,
                   what="the classic commit")
        assert describe(conn, tid).producer_epoch == epoch


def test_a_version_2_marker_needs_a_newer_epoch(server) -> None:
    """WriteTxnMarkers v2 (KIP-1228): a marker of transaction version 2 whose epoch is not
    newer than the producer's on the partition (a late or repeated one) is refused with
    INVALID_PRODUCER_EPOCH; a classic one at the same epoch is still written."""
    tid = "tv2-markers"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready(conn, tid)
        pid = init(conn, tid, version=5).producer_id
        assert produce(conn, tid, 1, pid, 0, 0, version=12) == 0
        assert end_v5(conn, tid, pid, 0, True) == (0, pid, 1)
        wait_until(lambda: describe(conn, tid).transaction_state == "CompleteCommit", timeout=TIMEOUT,
                   what="the commit's marker at epoch 1")

        def marker(epoch: int, version: int, transaction_version: int) -> int:
            response = conn.request(ApiKey.WRITE_TXN_MARKERS, version, {"markers": [{
                "producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
                "coordinator_epoch": 0, "transaction_version": transaction_version,
                "topics": [{"name": TOPIC, "partition_indexes": [1]}]}]})
            return response.markers[0].topics[0].partitions[0].error_code

        assert marker(1, 2, 2) == INVALID_PRODUCER_EPOCH  # the same epoch again, version 2
        assert marker(1, 2, 0) == 0  # a classic marker at the producer's epoch
        assert marker(1, 1, 2) == 0  # v1 carries no transaction version: classic
        assert marker(2, 2, 2) == 0  # newer: written


def test_txn_offset_commit_v5_adds_the_offsets_partition(server) -> None:
    tid, group = "tv2-offsets", "tv2-group"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        ready(conn, tid)
        ready_coordinator(conn, group)
        response = init(conn, tid, version=5)
        pid, epoch = response.producer_id, response.producer_epoch
        # v3 and v4 only verify (48, then 120 for the same refusal); v5 adds it.
        assert txn_offset_commit(conn, group, pid, epoch, TOPIC, 7, tid=tid, version=3) == INVALID_TXN_STATE
        assert txn_offset_commit(conn, group, pid, epoch, TOPIC, 7, tid=tid, version=4) == TRANSACTION_ABORTABLE
        assert txn_offset_commit(conn, group, pid, epoch, TOPIC, 7, tid=tid, version=5) == 0
        state = describe(conn, tid)
        assert state.transaction_state == "Ongoing"
        assert [t.topic for t in state.topics] == ["__consumer_offsets"]
        assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch + 1)
        wait_until(lambda: committed(conn, group, TOPIC) == 7, timeout=TIMEOUT,
                   what="the COMMIT marker materialising the offset")


def test_the_next_transaction_ended_while_the_markers_are_out_retries(tmp_path) -> None:
    """franz-go's TestTxnEtl sequence: EndTxn v5 commits (epoch e, answered e + 1), and the
    client ends its next transaction (an abort: its produces failed) at e + 1 while the
    commit's markers are still being written. Kafka 4.4 answers CONCURRENT_TRANSACTIONS
    there (the completion is pending, checked before the epoch) and the client retries;
    PRODUCER_FENCED failed franz-go's session. The markers are held deterministically: the
    transaction's one partition has its only replica on a stopped node."""
    tid = "tv2-next-while-markers"
    with running_cluster(tmp_path, 3, extra={"transaction.state.log.num.partitions": "1",
                                             "transaction.state.log.replication.factor": "1"}) as cluster:
        with WireConnection(cluster.nodes[1].bootstrap, timeout=TIMEOUT) as conn:
            coordinator = wait_until(lambda: (lambda f: f.node_id if f.error_code == 0 else None)(find(conn, tid)),
                                     timeout=TIMEOUT, what="a transaction coordinator")
        holder = next(i for i in cluster.nodes if i != coordinator)
        with WireConnection(cluster.nodes[coordinator].bootstrap, timeout=TIMEOUT) as conn:
            created = conn.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
                "name": "held", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [holder]}],
                "configs": [{"name": "min.insync.replicas", "value": "1"}]}],
                "timeout_ms": 15000, "validate_only": False})
            assert created.topics[0].error_code == 0
            ready(conn, tid)
            response = init(conn, tid, version=5)
            assert response.error_code == 0
            pid, epoch = response.producer_id, response.producer_epoch
            wait_until(lambda: add(conn, tid, pid, epoch, [("held", 0)]) == {("held", 0): 0}, timeout=TIMEOUT,
                       what="held in the coordinator's metadata")
            cluster.stop_node(holder)
            assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch + 1)
            assert describe(conn, tid).transaction_state == "PrepareCommit"
            # The next transaction's abort, at the epoch the commit answered: retry, not fenced.
            assert end_v5(conn, tid, pid, epoch + 1, False)[0] == CONCURRENT_TRANSACTIONS
            # So is its first add, and a TV1 EndTxn of the opposite outcome (not INVALID_TXN_STATE).
            assert add(conn, tid, pid, epoch + 1, [("held", 0)]) == {("held", 0): CONCURRENT_TRANSACTIONS}
            assert end(conn, tid, pid, epoch + 1, False, version=4) == CONCURRENT_TRANSACTIONS
            assert describe(conn, tid).transaction_state == "PrepareCommit"
            cluster.start_node(holder, wait=True)
            wait_until(lambda: describe(conn, tid).transaction_state == "CompleteCommit", timeout=TIMEOUT,
                       what="the commit's markers once the partition is back")
            assert end_v5(conn, tid, pid, epoch + 1, False) == (0, pid, epoch + 2)


def test_produce_v10_tells_where_the_leader_is(tmp_path) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint from v10."""
    with running_cluster(tmp_path, 2) as cluster:
        create_topic(cluster, "hinted", rf=1)
        leader = partition_info(cluster, "hinted")
        other = next(n for n in cluster.nodes if n != leader.leader)
        with WireConnection(cluster.nodes[other].bootstrap, timeout=TIMEOUT) as conn:
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "hinted", "partition_data": [{"index": 0, "records": values_batch([b"x"])}]}]}
            old = conn.request(ApiKey.PRODUCE, 9, body)
            new = conn.request(ApiKey.PRODUCE, 10, body)
        [old_part] = old.responses[0].partition_responses
        [new_part] = new.responses[0].partition_responses
        assert old_part.error_code == new_part.error_code == NOT_LEADER_OR_FOLLOWER
        assert (new_part.current_leader.leader_id, new_part.current_leader.leader_epoch) == (
            leader.leader, leader.leader_epoch)
        [endpoint] = new.node_endpoints
        host, port = cluster.nodes[leader.leader].bootstrap.rsplit(":", 1)
        assert (endpoint.node_id, endpoint.host, endpoint.port) == (leader.leader, host, int(port))
        assert old_part.current_leader.leader_id == -1 and not old.node_endpoints  # v9: no hints


JAVA_SOURCE = Path(__file__).parent / "java" / "TxnV2Producer.java"
JAVA_TOPIC = "tv2-java"
JAVA_TRANSACTIONS = 6  # every third one aborted: 0, 1 commit, 2 aborts, 3, 4 commit, 5 aborts


def test_kafkas_java_producer_runs_transactions_at_version_2(server, tmp_path) -> None:
    """Kafka 4.4's producer sees transaction.version 2 finalized and uses KIP-890 part 2: no
    AddPartitionsToTxn/AddOffsetsToTxn (Produce v12, TxnOffsetCommit v5) and EndTxn v5, whose
    epoch bumps show in the coordinator's state (one per transaction; none at version 1)."""
    jars = kafka_jars()
    tid, group = "tv2-java-txn", "tv2-java-group"
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        assert conn.create_topic(JAVA_TOPIC, 2) == 0
        ready(conn, tid)
        ready_coordinator(conn, group)
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", jars.classpath, "-d", str(classes), str(JAVA_SOURCE)],
                   check=True, timeout=180)
    command = [java_binary(), "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", f"{classes}:{jars.classpath}",
               "TxnV2Producer", server.bootstrap, JAVA_TOPIC, tid, group, str(JAVA_TRANSACTIONS)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    outcomes = run.stdout.split()
    assert outcomes[-1] == "done" and outcomes.count("committed") == 4 and outcomes.count("aborted") == 2
    committed_ids = [i for i in range(JAVA_TRANSACTIONS) if i % 3 != 2]
    with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
        state = wait_until(lambda: (lambda s: s if s.transaction_state == "CompleteAbort" else None)(
            describe(conn, tid)), timeout=TIMEOUT, what="the last transaction's abort completed")
        assert state.producer_epoch == JAVA_TRANSACTIONS  # epoch 0 from InitProducerId, one bump per EndTxn
        wait_until(lambda: all(stable(conn, p, topic=JAVA_TOPIC) for p in (0, 1)), timeout=TIMEOUT,
                   what="the markers below the high watermark")
        for partition in (0, 1):
            expected = [f"c-{i}-{j}".encode() for i in committed_ids for j in (partition, partition + 2)]
            assert committed_values(conn, partition, topic=JAVA_TOPIC) == expected  # exactly once, in order
            uncommitted = committed_values(conn, partition, topic=JAVA_TOPIC, isolation=0)
            assert f"a-2-{partition}".encode() in uncommitted  # the aborted writes are in the log
        assert committed(conn, group, JAVA_TOPIC) == max(committed_ids) + 1  # the aborted offset is not
