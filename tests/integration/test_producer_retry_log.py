"""A producer retrying one partition for seconds logs `producer.retry` once per 5 s with the
count of folded retries, not once per attempt (client/log_throttle.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from raftka import NotEnoughReplicasError, Producer
from raftka.testing.local_cluster import LocalCluster


def test_repeated_retries_are_one_line_with_a_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # One broker whose default min.insync.replicas (2) its ISR (1) can never meet: every acks=all
    # produce is answered NOT_ENOUGH_REPLICAS, which is retriable, until delivery.timeout.ms.
    cluster = LocalCluster(tmp_path, 1, log_level="WARNING", extra_config={"min.insync.replicas": "2"})
    try:
        cluster.start_and_wait(60)
        caplog.set_level(logging.INFO, logger="raftka.client.producer")
        with Producer(cluster.bootstrap, acks="all", retry_backoff_ms=50, delivery_timeout_ms=7000,
                      request_timeout_ms=5000) as producer:
            with pytest.raises(Exception) as failed:  # noqa: B017 - checked just below
                producer.send("retried", b"v").result(timeout=60)
    finally:
        cluster.stop(timeout=15)
    assert isinstance(failed.value, NotEnoughReplicasError) or "NOT_ENOUGH_REPLICAS" in str(failed.value)
    retries = [r for r in caplog.records if getattr(r, "raftka_event", None) == "producer.retry"]
    assert 1 <= len(retries) <= 2, [r.getMessage() for r in retries]
    folded = [r.raftka_fields.get("repeated", 0) for r in retries]
    assert folded[0] == 0
    assert len(retries) == 1 or folded[1] > 5, folded
