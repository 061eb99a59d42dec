"""ShareFetch (78) and ShareAcknowledge (79) on a real broker process, over real sockets
(broker/handlers/share_fetch.py, broker/group/share_partition_manager.py).

The versions are served but not advertised yet: requests are sent at the versions the
served table names (client/protocol/api_keys.py). Each test uses its own topic and group;
the groups' share configs are set with IncrementalAlterConfigs (resource type 32), as a user
would: `share.auto.offset.reset=earliest` so records produced before the first fetch count.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.client.blocking import Producer
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.api_keys import DECLARED_VERSIONS
from raftka.log.record_batch import iter_batches
from tests.compat.server_process import ServerProcess, running_server, server_with_topics
from tests.compat.wire_client import WireConnection, values_batch
from tests.support import wait_until

SHARE_FETCH_V = DECLARED_VERSIONS[ApiKey.SHARE_FETCH][1]
SHARE_ACK_V = DECLARED_VERSIONS[ApiKey.SHARE_ACKNOWLEDGE][1]
SHARE_HEARTBEAT_V = DECLARED_VERSIONS[ApiKey.SHARE_GROUP_HEARTBEAT][1]
GROUP_RESOURCE = 32
COORDINATOR_LOADING = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.NOT_COORDINATOR}
ACCEPT, RELEASE, REJECT = 1, 2, 3
TOPICS = {"sf-two": 1, "sf-acks": 1, "sf-lock": 1, "sf-close": 1, "sf-poll": 1, "sf-errors": 1, "sf-txn": 1,
          "sf-retention": 1, "sf-gone": 1, "sf-load": 1, "sf-leave": 1, "sf-expire": 1, "sf-reset": 1,
          "sf-lag": 1}


# Kafka bounds a group's share.record.lock.duration.ms by these broker configs (15 s at least by
# default); the lock timeout test wants 1 s, the session expiry test a 2 s session.
PROPERTIES = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
              "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1", "group.share.min.record.lock.duration.ms": "1000",
              "group.share.min.session.timeout.ms": "1000", "group.share.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("share-fetch"), properties=PROPERTIES) as started:
        with WireConnection(started.bootstrap) as conn:
            for name, partitions in TOPICS.items():
                assert conn.create_topic(name, partitions) == 0, name
        yield started


def set_group_configs(conn: WireConnection, group: str, **configs: str) -> None:
    response = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group,
                       "configs": [{"name": k.replace("_", "."), "value": v, "config_operation": 0}
                                   for k, v in configs.items()]}],
        "validate_only": False})
    assert response.responses[0].error_code == 0, response


def topic_id(conn: WireConnection, name: str) -> uuid.UUID:
    response = conn.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                                                  "allow_auto_topic_creation": False})
    return response.topics[0].topic_id


def produce(conn: WireConnection, topic: str, values: list[bytes]) -> None:
    assert conn.produce(topic, 0, values_batch(values)).error_code == 0


class ShareMember:
    """One share consumer's session with the broker, on its own connection."""

    def __init__(self, bootstrap: str, group: str, topic: str, tid: uuid.UUID) -> None:
        self.conn = WireConnection(bootstrap, timeout=30.0)
        self.group, self.topic, self.tid = group, topic, tid
        self.member_id = str(uuid.uuid4())
        self.epoch = 0

    def close(self) -> None:
        self.conn.close()

    def fetch(self, acks: list[tuple[int, int, list[int]]] | None = None, *, max_records: int = 500,
              max_wait_ms: int = 0, epoch: int | None = None, partitions: bool = True, batch_size: int = 500):
        """A ShareFetch: (top-level response, its one partition entry or None)."""
        epoch = self.epoch if epoch is None else epoch
        parts = [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": t} for f, last, t in acks or []]}]
        body = {"group_id": self.group, "member_id": self.member_id, "share_session_epoch": epoch,
                "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
                "batch_size": batch_size, "share_acquire_mode": 0, "is_renew_ack": False,
                "topics": [{"topic_id": self.tid, "partitions": parts}] if partitions else [],
                "forgotten_topics_data": []}
        response = self.conn.request(ApiKey.SHARE_FETCH, SHARE_FETCH_V, body, timeout=30 + max_wait_ms / 1000)
        if response.error_code == 0 and epoch >= 0:
            self.epoch = 1 if epoch == 0 else epoch + 1
        entry = response.responses[0].partitions[0] if response.responses else None
        return response, entry

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], *, epoch: int | None = None):
        epoch = self.epoch if epoch is None else epoch
        response = self.conn.request(ApiKey.SHARE_ACKNOWLEDGE, SHARE_ACK_V, {
            "group_id": self.group, "member_id": self.member_id, "share_session_epoch": epoch,
            "is_renew_ack": False, "topics": [{"topic_id": self.tid, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": t} for f, last, t in acks]}]}]})
        if response.error_code == 0 and epoch > 0:
            self.epoch = epoch + 1
        return response

    def take(self, **options) -> dict[int, tuple[bytes, int]]:
        """Fetch and return {offset: (value, delivery count)} of the records acquired."""
        response, entry = self.fetch(**options)
        assert response.error_code == 0, response
        return acquired(entry)


def acquired(entry) -> dict[int, tuple[bytes, int]]:
    """The acquired records of a ShareFetch partition entry: offset -> (value, delivery count)."""
    if entry is None:
        return {}
    assert entry.error_code == 0, entry
    counts = {}
    for r in entry.acquired_records:
        for offset in range(r.first_offset, r.last_offset + 1):
            counts[offset] = r.delivery_count
    out, markers = {}, set()
    for batch in iter_batches(bytes(entry.records)):
        for record in batch.records:
            if batch.header.is_control:
                markers.add(record.offset)  # a transaction marker: acquired, not a record to consume
            elif record.offset in counts:
                out[record.offset] = (record.value, counts[record.offset])
    missing = set(counts) - set(out) - markers
    assert not missing, f"acquired offsets without a record: {sorted(missing)}"
    return out


def members(server: ServerProcess, group: str, topic: str, n: int, **configs: str) -> list[ShareMember]:
    """`n` members of `group`, each joined with ShareGroupHeartbeat as a share consumer does
    first: the coordinator initializes the partition's share state before it assigns it."""
    with WireConnection(server.bootstrap) as conn:
        set_group_configs(conn, group, share_auto_offset_reset="earliest", **configs)
        tid = topic_id(conn, topic)
        joined = [ShareMember(server.bootstrap, group, topic, tid) for _ in range(n)]
        wait_until(lambda: conn.find_coordinator(group).error_code == 0, 30, what="a group coordinator")
        box: dict = {}
        for member in joined:

            def answered(member: ShareMember = member, box: dict = box) -> bool:
                box["r"] = conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, SHARE_HEARTBEAT_V, {
                    "group_id": group, "member_id": member.member_id, "member_epoch": 0, "rack_id": None,
                    "subscribed_topic_names": [topic]})
                return box["r"].error_code not in COORDINATOR_LOADING

            wait_until(answered, 30, what=f"a member joined {group}")
            response = box["r"]
            assert response.error_code == 0, response
            assert [t.topic_id for t in response.assignment.topic_partitions] == [tid], response
    return joined


def test_two_members_share_a_partition_without_overlap(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-two", [b"v%d" % i for i in range(10)])
    a, b = members(server, "g-two", "sf-two", 2)
    try:
        first_a = a.take(max_records=4)
        first_b = b.take(max_records=4)
        assert sorted(first_a) == [0, 1, 2, 3] and sorted(first_b) == [4, 5, 6, 7]
        # A accepts its records, piggy-backed on its next fetch, and gets the rest, in
        # AcquiredRecords of at most batch_size offsets.
        response, entry = a.fetch([(0, 3, [ACCEPT])], max_records=4, batch_size=1)
        assert entry.acknowledge_error_code == 0
        assert [(r.first_offset, r.last_offset) for r in entry.acquired_records] == [(8, 8), (9, 9)]
        rest = acquired(entry)
        assert sorted(rest) == [8, 9]
        got = {**first_a, **first_b, **rest}
        assert {o: v for o, (v, _) in got.items()} == {i: b"v%d" % i for i in range(10)}
        assert {count for _, count in got.values()} == {1}
        assert b.take(max_records=4) == {}  # nothing left that is not locked to someone
    finally:
        a.close()
        b.close()


def test_accept_release_reject(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-acks", [b"a", b"b", b"c"])
    a, b = members(server, "g-acks", "sf-acks", 2)
    try:
        assert sorted(a.take()) == [0, 1, 2]
        # B cannot acknowledge A's records: all or nothing, INVALID_RECORD_STATE.
        b.take()  # opens B's session
        refused = b.acknowledge([(0, 0, [ACCEPT])])
        assert refused.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
        done = a.acknowledge([(0, 2, [ACCEPT, RELEASE, REJECT])])
        assert done.error_code == 0 and done.responses[0].partitions[0].error_code == 0
        # The released record comes back, delivered a second time; the rejected one never does.
        assert b.take() == {1: (b"b", 2)}
        again = a.acknowledge([(1, 1, [ACCEPT])])
        assert again.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    finally:
        a.close()
        b.close()


def lag_of(conn: WireConnection, group: str, topic: str) -> tuple[int, int, int]:
    """(start offset, lag, error) of `topic`-0 in DescribeShareGroupOffsets v1."""
    described = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
        {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]}).groups[0]
    (p,) = described.topics[0].partitions
    return p.start_offset, p.lag, p.error_code


def test_describe_offsets_lag_counts_records_not_yet_delivered_completely(server: ServerProcess) -> None:
    # Kafka 4.4's Lag: end offset - start offset - records in a terminal state past the start.
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-lag", [b"%d" % i for i in range(6)])
        (member,) = members(server, "g-lag", "sf-lag", 1)
        try:
            assert sorted(member.take()) == list(range(6))
            # Nothing written yet (an acquisition is persisted once it completes): unknown.
            assert lag_of(conn, "g-lag", "sf-lag") == (-1, -1, 0)
            done = member.acknowledge([(1, 3, [ACCEPT, REJECT, ACCEPT])])
            assert done.responses[0].partitions[0].error_code == 0
            # Offset 0, still acquired, holds the start offset; 1-3 are complete, 0 and 4-5 are not.
            assert lag_of(conn, "g-lag", "sf-lag") == (0, 3, 0)
            member.acknowledge([(0, 0, [ACCEPT]), (4, 5, [RELEASE])])
            produce(conn, "sf-lag", [b"6", b"7"])
            assert lag_of(conn, "g-lag", "sf-lag") == (4, 4, 0)
        finally:
            member.close()


def test_lock_timeout_redelivers_then_archives_at_the_delivery_limit(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-lock", [b"poison"])
    a, b = members(server, "g-lock", "sf-lock", 2, share_record_lock_duration_ms="1000",
                   share_delivery_count_limit="2")
    try:
        assert a.take() == {0: (b"poison", 1)}
        # Not acknowledged: its lock times out and B's long poll is woken with it, delivered twice.
        assert b.take(max_wait_ms=20_000) == {0: (b"poison", 2)}
        # Timed out again at the limit: archived, not delivered a third time.
        expired = wait_until(lambda: (found := server.log_events("share_partition.locks_expired"))[1:] and found,
                             timeout=30, what="the second lock expiry")
        assert expired[-1]["start_offset"] == 1, expired
        with WireConnection(server.bootstrap) as conn:
            produce(conn, "sf-lock", [b"next"])
        assert a.take(max_wait_ms=20_000) == {1: (b"next", 1)}
    finally:
        a.close()
        b.close()


def test_closing_the_session_releases_the_members_records(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-close", [b"x", b"y"])
    a, b = members(server, "g-close", "sf-close", 2)
    try:
        assert sorted(a.take()) == [0, 1]
        closed = a.acknowledge([(0, 0, [ACCEPT])], epoch=-1)  # accept one, close the session
        assert closed.error_code == 0 and closed.responses[0].partitions[0].error_code == 0
        assert b.take() == {1: (b"y", 2)}
        response, _ = a.fetch(epoch=1)
        assert response.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    finally:
        a.close()
        b.close()


def test_a_closed_connection_releases_its_sessions_records(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-gone", [b"g0", b"g1"])
    a, b = members(server, "g-gone", "sf-gone", 2)
    try:
        assert sorted(a.take()) == [0, 1]
        assert b.take() == {}  # opens B's session; everything is locked to A
        a.close()  # A's process died: no ShareAcknowledge, its locks (30 s) have not run out
        assert b.take(max_wait_ms=20_000) == {0: (b"g0", 2), 1: (b"g1", 2)}
    finally:
        b.close()


def heartbeat(server: ServerProcess, member: ShareMember, epoch: int):
    with WireConnection(server.bootstrap) as conn:
        return conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, SHARE_HEARTBEAT_V, {
            "group_id": member.group, "member_id": member.member_id, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": [member.topic] if epoch == 0 else None})


def test_a_member_leaving_its_group_releases_its_records(server: ServerProcess) -> None:
    """The group coordinator tells the share partitions that a member left (a heartbeat with
    epoch -1), though its fetch connection stays open and its locks (30 s) have not run out."""
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-leave", [b"l0", b"l1"])
    a, b = members(server, "g-leave", "sf-leave", 2)
    try:
        assert sorted(a.take()) == [0, 1]
        assert b.take() == {}
        left = heartbeat(server, a, -1)
        assert left.error_code == 0, left
        assert b.take(max_wait_ms=20_000) == {0: (b"l0", 2), 1: (b"l1", 2)}
    finally:
        a.close()
        b.close()


def test_a_member_whose_session_expired_has_its_records_released(server: ServerProcess) -> None:
    """No heartbeat within share.session.timeout.ms (2 s): the coordinator expires the members
    and A's records come back to B's open session before their 30 s locks run out."""
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-expire", [b"e0"])
    a, b = members(server, "g-expire", "sf-expire", 2, share_session_timeout_ms="2000",
                   share_heartbeat_interval_ms="1000")
    try:
        assert a.take() == {0: (b"e0", 1)}
        assert b.take() == {}
        assert b.take(max_wait_ms=20_000) == {0: (b"e0", 2)}
        server.logged("group.member_expired", lambda e: e["member"] == a.member_id)
    finally:
        a.close()
        b.close()


def test_reset_offsets_are_what_the_next_member_reads(server: ServerProcess) -> None:
    """AlterShareGroupOffsets on the emptied group: the partition leader forgets the share
    partition it had cached, so the next member reads from the new start offset."""
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-reset", [b"r0", b"r1", b"r2"])
    (a,) = members(server, "g-reset", "sf-reset", 1)
    try:
        assert sorted(a.take()) == [0, 1, 2]
        assert a.acknowledge([(0, 2, [ACCEPT])]).responses[0].partitions[0].error_code == 0
        assert heartbeat(server, a, -1).error_code == 0
    finally:
        a.close()
    with WireConnection(server.bootstrap) as conn:
        altered = conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g-reset", "topics": [
            {"topic_name": "sf-reset", "partitions": [{"partition_index": 0, "start_offset": 1}]}]})
        assert altered.error_code == 0 and altered.responses[0].partitions[0].error_code == 0, altered
    (b,) = members(server, "g-reset", "sf-reset", 1)
    try:
        assert b.take() == {1: (b"r1", 1), 2: (b"r2", 1)}
    finally:
        b.close()


def test_long_poll_is_woken_by_new_records(server: ServerProcess) -> None:
    (a,) = members(server, "g-poll", "sf-poll", 1)
    got: dict = {}
    try:
        assert a.take() == {}  # opens the session: nothing there yet
        poller = threading.Thread(target=lambda: got.update(a.take(max_wait_ms=30_000)))
        poller.start()
        with WireConnection(server.bootstrap) as conn:
            produce(conn, "sf-poll", [b"late"])
        poller.join(60)
        assert got == {0: (b"late", 1)}
    finally:
        a.close()


def test_session_errors(server: ServerProcess) -> None:
    (a,) = members(server, "g-errors", "sf-errors", 1)
    try:
        response, _ = a.fetch(epoch=3)
        assert response.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        a.take()
        response, _ = a.fetch(epoch=7)
        assert response.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert a.acknowledge([], epoch=0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        response, _ = a.fetch([(0, 0, [ACCEPT])], epoch=0)  # acknowledging in a new session
        assert response.error_code == ErrorCode.INVALID_REQUEST
    finally:
        a.close()


def test_acknowledged_records_stay_acknowledged_across_a_restart(tmp_path: Path) -> None:
    with server_with_topics(tmp_path, {"sf-restart": 1}) as server:
        with WireConnection(server.bootstrap) as conn:
            produce(conn, "sf-restart", [b"r%d" % i for i in range(6)])
        (a,) = members(server, "g-restart", "sf-restart", 1)
        try:
            assert sorted(a.take(max_records=4)) == [0, 1, 2, 3]
            assert a.acknowledge([(0, 3, [ACCEPT])]).responses[0].partitions[0].error_code == 0
        finally:
            a.close()
        server.stop()
        server.start()
        (b,) = members(server, "g-restart", "sf-restart", 1)
        try:
            assert b.take(max_wait_ms=10_000) == {4: (b"r4", 1), 5: (b"r5", 1)}
        finally:
            b.close()


def test_read_committed_groups_skip_aborted_and_open_transactions(server: ServerProcess) -> None:
    with Producer(server.bootstrap, transactional_id="sf-txn-producer") as producer:
        producer.init_transactions()
        for values, commit in (([b"c1"], True), ([b"a1", b"a2"], False), ([b"c2"], True)):
            producer.begin_transaction()
            for value in values:
                producer.send("sf-txn", value, partition=0)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
        producer.begin_transaction()
        producer.send("sf-txn", b"open", partition=0)
        producer.flush()
        (committed,) = members(server, "g-txn-committed", "sf-txn", 1, share_isolation_level="read_committed")
        (everything,) = members(server, "g-txn-all", "sf-txn", 1)
        try:
            # read_committed: up to the last stable offset, aborted records archived, not delivered.
            assert sorted(v for v, _ in committed.take().values()) == [b"c1", b"c2"]
            assert sorted(v for v, _ in everything.take().values()) == [b"a1", b"a2", b"c1", b"c2", b"open"]
            producer.abort_transaction()
            assert committed.take() == {}  # the aborted ones stay archived
        finally:
            committed.close()
            everything.close()


def test_records_below_the_log_start_are_not_delivered(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        produce(conn, "sf-retention", [b"d%d" % i for i in range(5)])
    (a, b) = members(server, "g-retention", "sf-retention", 2)
    try:
        assert sorted(a.take(max_records=2)) == [0, 1]  # loads the share partition at offset 0
        with WireConnection(server.bootstrap) as conn:  # DeleteRecords moves the log start to 3
            response = conn.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "sf-retention", "partitions": [
                {"partition_index": 0, "offset": 3}]}], "timeout_ms": 15000})
            assert response.topics[0].partitions[0].error_code == 0
        assert b.take() == {3: (b"d3", 1), 4: (b"d4", 1)}  # 2 is gone, never delivered
        # A's records below the log start can still be acknowledged: they are done (skipped).
        assert a.acknowledge([(0, 1, [ACCEPT])]).responses[0].partitions[0].error_code == 0
    finally:
        a.close()
        b.close()


def test_three_members_drain_a_partition_each_record_accepted_once(server: ServerProcess) -> None:
    """Three members fetch concurrently, piggy-backing the acknowledgement of what they got
    on their next fetch; each releases every 7th record on its first delivery. Every record is
    accepted exactly once, the released ones after a second delivery, and no attempt (offset,
    delivery count) is ever handed to two members."""
    total = 300
    with WireConnection(server.bootstrap) as conn:
        for start in range(0, total, 50):
            produce(conn, "sf-load", [b"l%d" % i for i in range(start, start + 50)])
    group = members(server, "g-load", "sf-load", 3)
    deliveries: list[tuple[int, int, int]] = []  # (offset, delivery count, member index)
    accepted: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(index: int, member: ShareMember) -> None:
        try:
            pending: list[tuple[int, int, list[int]]] = []
            idle = 0
            while idle < 3:
                response, entry = member.fetch(pending, max_records=17, max_wait_ms=300)
                assert response.error_code == 0, response
                assert entry is None or entry.acknowledge_error_code == 0, entry
                got = acquired(entry)
                pending = []
                with lock:
                    for offset in sorted(got):
                        deliveries.append((offset, got[offset][1], index))
                        release = offset % 7 == 0 and got[offset][1] == 1
                        pending.append((offset, offset, [RELEASE if release else ACCEPT]))
                        if not release:
                            accepted.append(offset)
                idle = 0 if got else idle + 1
            if pending:
                assert member.acknowledge(pending).responses[0].partitions[0].error_code == 0
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(group)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for member in group:
            member.close()
    assert not errors, errors
    assert sorted(accepted) == list(range(total))
    attempts = [(offset, count) for offset, count, _ in deliveries]
    assert len(attempts) == len(set(attempts)), "an attempt was handed to two members"
    assert sorted(attempts) == sorted([(o, 1) for o in range(total)] + [(o, 2) for o in range(0, total, 7)])
