"""The transaction coordinator over real sockets: one raftka server, the raw protocol
(FindCoordinator key_type 1, InitProducerId, AddPartitionsToTxn v3/v4, AddOffsetsToTxn,
EndTxn, DescribeTransactions, ListTransactions) and `__transaction_state` on disk."""

from __future__ import annotations

import itertools

import pytest

from raftka.client.protocol import ApiKey
from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TOPIC = "txn-data"
ABORT_INTERVAL_MS = 200
_ids = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("txncoord"), num_partitions=2, properties={
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS),
    }) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 2) == 0
        yield server


@pytest.fixture
def conn(server):
    with WireConnection(server.bootstrap) as conn:
        yield conn


def new_tid() -> str:
    return f"txn-{next(_ids)}"


def find(conn, tid: str):
    return conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": tid, "key_type": 1})


def ready(conn, tid: str) -> None:
    """Wait until the id's coordinator is found and loaded (the first lookup creates the topic)."""
    wait_until(lambda: find(conn, tid).error_code == 0, timeout=60, what="a transaction coordinator")
    wait_until(lambda: describe(conn, tid).error_code in (0, 105), timeout=60, what="the coordinator's load")


def init(conn, tid: str, *, version: int = 4, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1):
    body = {"transactional_id": tid, "transaction_timeout_ms": timeout_ms}
    if version >= 3:
        body.update(producer_id=pid, producer_epoch=epoch)
    return conn.request(ApiKey.INIT_PRODUCER_ID, version, body)


def add(conn, tid: str, pid: int, epoch: int, tps, *, version: int = 3) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    response = conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()]})
    return {(t.name, r.partition_index): r.partition_error_code
            for t in response.results_by_topic_v3_and_below for r in t.results_by_partition}


def verify(conn, tid: str, pid: int, epoch: int, tps):
    response = conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
        "topics": [{"name": t, "partitions": [p]} for t, p in tps]}]})
    assert response.error_code == 0
    [result] = response.results_by_transaction
    return {(t.name, r.partition_index): r.partition_error_code
            for t in result.topic_results for r in t.results_by_partition}


def end(conn, tid: str, pid: int, epoch: int, commit: bool, *, version: int = 3) -> int:
    return conn.request(ApiKey.END_TXN, version, {"transactional_id": tid, "producer_id": pid,
                                                  "producer_epoch": epoch, "committed": commit}).error_code


def describe(conn, tid: str):
    [state] = conn.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states
    return state


def begun(conn, tid: str, **kw):
    ready(conn, tid)
    response = init(conn, tid, **kw)
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


def test_find_coordinator_names_this_broker_and_refuses_an_empty_id(server, conn):
    tid = new_tid()
    ready(conn, tid)
    found = find(conn, tid)
    assert (found.node_id, found.port) == (1, server.client_port)
    assert find(conn, "").error_code == 42  # INVALID_REQUEST


def test_init_producer_id_bumps_the_epoch_and_recovers_per_kip_360(conn):
    tid = new_tid()
    pid, epoch = begun(conn, tid)
    assert epoch == 0
    again = init(conn, tid)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, 1)
    # KIP-360: the producer's current epoch bumps; the previous one is a retry of that bump.
    bumped = init(conn, tid, pid=pid, epoch=1)
    assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
    retried = init(conn, tid, pid=pid, epoch=1)
    assert (retried.error_code, retried.producer_epoch) == (0, 2)
    assert init(conn, tid, pid=pid, epoch=0).error_code == 90  # PRODUCER_FENCED
    assert init(conn, tid, pid=pid, epoch=0, version=3).error_code == 47  # before v4: INVALID_PRODUCER_EPOCH
    assert init(conn, tid, pid=pid, epoch=-1).error_code == 42  # only one of them given
    assert init(conn, tid, timeout_ms=900_001).error_code == 50  # above transaction.max.timeout.ms
    assert init(conn, "").error_code == 42


def test_a_transaction_from_add_partitions_to_end_txn(conn):
    tid = new_tid()
    pid, epoch = begun(conn, tid)
    assert describe(conn, tid).transaction_state == "Empty"
    assert add(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    offsets = conn.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": tid, "producer_id": pid,
                                                          "producer_epoch": epoch, "group_id": "g1"})
    assert offsets.error_code == 0
    state = describe(conn, tid)
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch) == (
        0, "Ongoing", pid, epoch)
    assert state.transaction_start_time_ms > 0
    topics = {t.topic: list(t.partitions) for t in state.topics}
    assert topics[TOPIC] == [0] and list(topics) == ["__consumer_offsets", TOPIC]
    # KIP-890 part 1, as a partition leader asks it.
    assert verify(conn, tid, pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == {(TOPIC, 0): 0, (TOPIC, 1): 120}
    listed = conn.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"],
                                                        "producer_id_filters": [pid], "duration_filter": -1})
    assert listed.error_code == 0 and list(listed.unknown_state_filters) == ["Bogus"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
    # Wrong pid / epoch / outcome.
    assert end(conn, tid, pid + 1000, epoch, True) == 49
    assert end(conn, tid, pid, epoch + 1, True) == 90
    assert end(conn, tid, pid, epoch + 1, True, version=1) == 47
    assert end(conn, tid, pid, epoch, True) == 0
    # Answered once PrepareCommit is durable; a retry gets 51 until CompleteCommit, then 0.
    assert describe(conn, tid).transaction_state in ("PrepareCommit", "CompleteCommit")
    assert end(conn, tid, pid, epoch, True) in (0, 51)
    # The other outcome: CONCURRENT_TRANSACTIONS while the commit's markers are out (Kafka 4.4's
    # pending state), then INVALID_TXN_STATE once CompleteCommit is written.
    # The markers reach both partitions' leaders (this broker), then CompleteCommit is written.
    wait_until(lambda: describe(conn, tid).transaction_state == "CompleteCommit", timeout=30,
               what="the commit markers and CompleteCommit")
    assert end(conn, tid, pid, epoch, False) == 48
    assert describe(conn, tid).topics == []
    assert end(conn, tid, pid, epoch, True) == 0  # a retry after completion
    assert add(conn, tid, pid, epoch, [(TOPIC, 1)]) == {(TOPIC, 1): 0}  # the next transaction
    assert describe(conn, tid).transaction_state == "Ongoing"


def test_add_partitions_refuses_unknown_partitions_and_does_not_attempt_the_others(conn):
    tid = new_tid()
    pid, epoch = begun(conn, tid)
    assert add(conn, tid, pid, epoch, [(TOPIC, 0), (TOPIC, 7), ("no-such-topic", 0)]) == {
        (TOPIC, 0): 55, (TOPIC, 7): 3, ("no-such-topic", 0): 3}
    assert describe(conn, tid).transaction_state == "Empty"
    assert add(conn, "no-such-id", pid, epoch, [(TOPIC, 0)]) != {(TOPIC, 0): 0}
    assert add(conn, tid, pid, epoch - 1 if epoch else 5, [(TOPIC, 0)], version=1) == {(TOPIC, 0): 47}


def test_a_second_producer_fences_the_first_and_aborts_its_transaction(conn):
    tid = new_tid()
    pid, epoch = begun(conn, tid)
    assert add(conn, tid, pid, epoch, [(TOPIC, 1)]) == {(TOPIC, 1): 0}
    takeover = init(conn, tid)
    assert takeover.error_code == 51  # CONCURRENT_TRANSACTIONS: the old txn is being aborted
    state = describe(conn, tid)
    assert state.transaction_state in ("PrepareAbort", "CompleteAbort")
    assert state.producer_epoch == epoch + 1  # the ABORT markers carry the bumped epoch
    assert end(conn, tid, pid, epoch, True) == 90  # the zombie is fenced
    # Its add is CONCURRENT_TRANSACTIONS while the abort's markers are out (checked before the
    # epoch, as Kafka 4.4 does), then PRODUCER_FENCED.
    wait_until(lambda: describe(conn, tid).transaction_state == "CompleteAbort", timeout=30,
               what="the abort markers and CompleteAbort")
    assert add(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 90}
    retried = init(conn, tid)  # the new producer's retry: a takeover costs two epochs
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (0, pid, epoch + 2)


def test_the_coordinator_aborts_a_transaction_past_its_timeout(conn):
    tid = new_tid()
    pid, epoch = begun(conn, tid, timeout_ms=1)
    assert add(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    wait_until(lambda: describe(conn, tid).transaction_state in ("PrepareAbort", "CompleteAbort"),
               timeout=30, what="the timed-out transaction's abort")
    assert describe(conn, tid).producer_epoch == epoch + 1
    assert end(conn, tid, pid, epoch, True) == 90


def test_describe_of_an_unknown_id_and_the_state_topic_on_disk(server, conn):
    assert describe(conn, "never-seen-" + new_tid()).error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
    topics = conn.request(ApiKey.METADATA, 9, {"topics": [{"name": "__transaction_state"}],
                                                "allow_auto_topic_creation": False,
                                                "include_cluster_authorized_operations": False,
                                                "include_topic_authorized_operations": False}).topics
    assert topics[0].error_code == 0 and topics[0].is_internal and len(topics[0].partitions) == 3


def test_a_moved_coordinator_answers_not_coordinator_and_the_new_one_loads_the_state(tmp_path):
    """Three nodes, one `__transaction_state` partition (RF 3): stop its leader mid-transaction;
    the new leader replays the partition and serves the transaction; the old leader, back as a
    follower, answers NOT_COORDINATOR. Then a coordinator killed with markers still owed: its
    successor resumes them."""
    from tests.integration.cluster_support import running_cluster

    with running_cluster(tmp_path, 3, extra={"transaction.state.log.num.partitions": "1"}) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        tid = "failover-txn"
        with WireConnection(cluster.nodes[1].bootstrap) as any_conn:
            wait_until(lambda: find(any_conn, tid).error_code == 0, timeout=60, what="a transaction coordinator")
            old = find(any_conn, tid).node_id
        with WireConnection(cluster.nodes[old].bootstrap) as conn:
            pid, epoch = begun(conn, tid)
            assert add(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
        cluster.stop_node(old)
        other = next(i for i in cluster.nodes if i != old)
        with WireConnection(cluster.nodes[other].bootstrap) as conn:
            new = wait_until(lambda: (lambda f: f.node_id if f.error_code == 0 and f.node_id != old else None)(
                find(conn, tid)), timeout=60, what="a new transaction coordinator")
        with WireConnection(cluster.nodes[new].bootstrap) as conn:
            state = wait_until(lambda: (lambda s: s if s.error_code == 0 else None)(describe(conn, tid)),
                               timeout=60, what="the new coordinator's load")
            assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", pid, epoch)
            assert [(t.topic, list(t.partitions)) for t in state.topics] == [(TOPIC, [0])]
            assert end(conn, tid, pid, epoch, False) == 0
            wait_until(lambda: describe(conn, tid).transaction_state == "CompleteAbort", timeout=60,
                       what="the new coordinator's markers")
        cluster.start_node(old, wait=True)
        with WireConnection(cluster.nodes[old].bootstrap) as conn:
            assert end(conn, tid, pid, epoch, False) == 16  # NOT_COORDINATOR
            assert describe(conn, tid).error_code == 16
            assert init(conn, tid).error_code == 16
        # A decided transaction whose markers cannot land yet (its only partition's one replica,
        # on the third node, is stopped) survives a coordinator move: the next coordinator
        # loads PrepareCommit and sends the markers once that partition is back.
        third = next(i for i in cluster.nodes if i not in (old, new))
        with WireConnection(cluster.nodes[new].bootstrap) as conn:
            created = conn.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
                "name": "resume-data", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [third]}],
                "configs": [{"name": "min.insync.replicas", "value": "1"}]}],  # markers need min.isr
                "timeout_ms": 15000, "validate_only": False})
            assert created.topics[0].error_code == 0
            pid2, epoch2 = begun(conn, "resume-txn")
            wait_until(lambda: add(conn, "resume-txn", pid2, epoch2, [("resume-data", 0)]) == {("resume-data", 0): 0},
                       timeout=30, what="resume-data in the coordinator's metadata")
            cluster.stop_node(third)
            assert end(conn, "resume-txn", pid2, epoch2, True) == 0
            assert describe(conn, "resume-txn").transaction_state == "PrepareCommit"
        with WireConnection(cluster.nodes[old].bootstrap) as conn:
            # The old node is the partition's preferred leader (it led it first): elect it again.
            def elected() -> bool:
                response = conn.request(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 15000,
                                        "topic_partitions": [{"topic": "__transaction_state", "partitions": [0]}]})
                [result] = response.replica_election_results[0].partition_result
                return result.error_code in (0, 84)  # 84: ELECTION_NOT_NEEDED (already the leader)
            wait_until(elected, timeout=60, what="the preferred leader's election")
            state = wait_until(lambda: (lambda s: s if s.error_code == 0 else None)(describe(conn, "resume-txn")),
                               timeout=60, what="the old node's load")
            assert (state.transaction_state, state.producer_id) == ("PrepareCommit", pid2)
            cluster.start_node(third, wait=True)
            wait_until(lambda: describe(conn, "resume-txn").transaction_state == "CompleteCommit", timeout=60,
                       what="the resumed markers and CompleteCommit")


def test_idle_ids_expire_ongoing_ones_do_not_and_both_survive_a_kill(tmp_path):
    """`transactional.id.expiration.ms`: an idle Empty id is removed (a tombstone), an Ongoing
    one stays; after kill -9 and a restart the replayed partition says the same."""
    with running_server(tmp_path, properties={
        "transaction.state.log.num.partitions": "1",
        "transactional.id.expiration.ms": "1000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS),
    }) as server:
        with WireConnection(server.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 1) == 0
            ongoing_pid, ongoing_epoch = begun(conn, "stays")
            assert add(conn, "stays", ongoing_pid, ongoing_epoch, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
            idle_pid, _ = begun(conn, "expires")
            wait_until(lambda: describe(conn, "expires").error_code == 105, timeout=60, what="the idle id's expiry")
            assert describe(conn, "stays").transaction_state == "Ongoing"
        # DescribeTransactions answers 105 from the moment the expiry starts (Kafka's "expiring");
        # the event follows once its tombstone is written.
        wait_until(lambda: server.log_events("txn.id_expired"), timeout=60, what="the expiry's tombstone")
        server.kill()
        server.start()
        with WireConnection(server.bootstrap) as conn:
            state = wait_until(lambda: (lambda s: s if s.error_code == 0 else None)(describe(conn, "stays")),
                               timeout=60, what="the reload")
            assert (state.transaction_state, state.producer_id) == ("Ongoing", ongoing_pid)
            assert describe(conn, "expires").error_code == 105
            again = init(conn, "expires")
            assert again.error_code == 0 and again.producer_id != idle_pid and again.producer_epoch == 0
