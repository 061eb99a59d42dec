"""Incremental fetch sessions (KIP-227) on the wire, against a real 3-node cluster.

The test speaks as one of the followers of a leader (replica_id = a real follower's
id) in a session of its own, beside the real followers' sessions: it lists only
caught-up offsets, so it does not hold back the real replication. Consumers get no
session (session_id 0), as Kafka clients expect from a broker that keeps none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from raftka.log.record_batch import iter_batches
from raftka.testing.local_cluster import LocalCluster
from tests.compat.wire_client import WireConnection, values_batch
from tests.integration.cluster_support import create_topic, partition_info, running_cluster
from tests.support import wait_until

TOPIC = "sessions"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(Path(tmp_path_factory.mktemp("fetch-sessions"))) as running:
        create_topic(running, TOPIC, partitions=6, rf=3)
        yield running


def _body(replica_id: int, session_id: int, epoch: int, listed: dict[int, int], *,
          forgotten: tuple[int, ...] = (), max_wait_ms: int = 0) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20} for p, offset in listed.items()]}] if listed else [],
            "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forgotten)}] if forgotten else []}


def _partitions(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def _values(result) -> list[bytes | None]:
    return [r.value for b in iter_batches(bytes(result.records)) for r in b.records]


def test_follower_session_lists_only_news(cluster: LocalCluster) -> None:
    infos = [partition_info(cluster, TOPIC, p) for p in range(6)]
    leader = infos[0].leader
    mine = [i.partition for i in infos if i.leader == leader]
    assert len(mine) >= 2, f"placement gave broker {leader} only partitions {mine}"
    pa, pb = mine[:2]
    follower = next(r for r in infos[0].replicas if r != leader)
    with WireConnection(cluster.nodes[leader].bootstrap) as conn:
        for p in (pa, pb):
            assert conn.produce(TOPIC, p, values_batch([b"a", b"b", b"c"]), acks=-1).error_code == 0
        ends = {p: conn.end_offset(TOPIC, p) for p in (pa, pb)}
        wait_until(lambda: all(conn.fetch(TOPIC, p, ends[p]).high_watermark == ends[p] for p in ends),
                   timeout=20, what="the high watermarks to reach the log ends")

        # epoch 0 creates the session: a full answer, for every partition listed
        full = conn.request(ApiKey.FETCH, 11, _body(follower, 0, 0, ends))
        assert full.error_code == 0 and full.session_id != 0
        assert set(_partitions(full)) == {pa, pb}
        assert all(r.high_watermark == ends[p] for p, r in _partitions(full).items())
        session = full.session_id

        # nothing new: an incremental fetch lists nothing and answers for nothing
        quiet = conn.request(ApiKey.FETCH, 11, _body(follower, session, 1, {}, max_wait_ms=200))
        assert quiet.error_code == 0 and quiet.session_id == session and _partitions(quiet) == {}

        # records in pb: only pb comes back, from where the session says the follower is
        assert conn.produce(TOPIC, pb, values_batch([b"d", b"e"]), acks=1).error_code == 0
        news = conn.request(ApiKey.FETCH, 11, _body(follower, session, 2, {}, max_wait_ms=10_000), timeout=30)
        assert set(_partitions(news)) == {pb}
        assert _values(_partitions(news)[pb]) == [b"d", b"e"]

        # a stale epoch is refused, and does not advance the session
        stale = conn.request(ApiKey.FETCH, 11, _body(follower, session, 2, {}))
        assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and stale.responses == []

        # a forgotten partition is no longer answered for, even with records waiting
        pb_end = conn.end_offset(TOPIC, pb)
        forgot = conn.request(ApiKey.FETCH, 11, _body(follower, session, 3, {pb: pb_end}, forgotten=(pb,),
                                                      max_wait_ms=200))
        assert forgot.error_code == 0 and pb not in _partitions(forgot)

        # epoch -1 closes the session (and fetches in full without one)
        closing = conn.request(ApiKey.FETCH, 11, _body(follower, session, -1, ends))
        assert closing.error_code == 0 and closing.session_id == 0 and set(_partitions(closing)) == {pa, pb}
        gone = conn.request(ApiKey.FETCH, 11, _body(follower, session, 4, {}))
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_consumers_get_no_session(cluster: LocalCluster) -> None:
    leader = partition_info(cluster, TOPIC, 0).leader
    with WireConnection(cluster.nodes[leader].bootstrap) as conn:
        asked = conn.request(ApiKey.FETCH, 11, _body(-1, 0, 0, {0: 0}))
        assert asked.error_code == 0 and asked.session_id == 0 and set(_partitions(asked)) == {0}
        made_up = conn.request(ApiKey.FETCH, 11, _body(-1, 12345, 1, {0: 0}))
        assert made_up.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and made_up.responses == []
