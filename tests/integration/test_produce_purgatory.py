"""The produce purgatory on real brokers (broker/replication/purgatory.py, delayed_produce.py):
an acks=all write whose follower is stopped (SIGSTOP) answers REQUEST_TIMED_OUT at the
request's timeout, not before and not never, with the offset it was appended at; acks=1 is
not held by the follower; once it is back, acks=all completes again."""

from __future__ import annotations

import time

from raftka.client.protocol import ErrorCode
from tests.compat.wire_client import WireConnection, values_batch
from tests.integration.cluster_support import create_topic, partition_info, running_cluster

TOPIC = "purgatory"
TIMEOUT_MS = 2000


def test_acks_all_answers_request_timed_out_while_a_follower_is_stopped(tmp_path) -> None:
    # The stopped follower stays in the ISR and registered for the whole wait (no ISR shrink,
    # no fencing): only the purgatory's deadline can answer the write.
    extra = {"replica.lag.time.max.ms": "60000", "broker.session.timeout.ms": "60000"}
    with running_cluster(tmp_path, 3, extra=extra) as cluster:
        create_topic(cluster, TOPIC, rf=2, configs={"min.insync.replicas": "1"})
        info = partition_info(cluster, TOPIC)
        (follower,) = [r for r in info.replicas if r != info.leader]
        with WireConnection(cluster.nodes[info.leader].bootstrap, timeout=60) as conn:
            assert conn.produce(TOPIC, 0, values_batch([b"both up"]), acks=-1).error_code == 0
            cluster.pause(follower)
            try:
                started = time.monotonic()
                stuck = conn.produce(TOPIC, 0, values_batch([b"stuck"]), acks=-1, timeout_ms=TIMEOUT_MS)
                elapsed = time.monotonic() - started
                assert stuck.error_code == ErrorCode.REQUEST_TIMED_OUT, stuck
                assert stuck.base_offset == 1  # appended by the leader; only the ISR wait timed out
                assert "not replicated to the ISR before the request timed out" in stuck.error_message
                assert TIMEOUT_MS / 1000 <= elapsed < TIMEOUT_MS / 1000 + 15, elapsed
                assert conn.produce(TOPIC, 0, values_batch([b"acks=1"]), acks=1).error_code == 0
            finally:
                cluster.resume(follower)
            after = conn.produce(TOPIC, 0, values_batch([b"follower back"]), acks=-1, timeout_ms=30_000)
            assert (after.error_code, after.base_offset) == (0, 3), after
