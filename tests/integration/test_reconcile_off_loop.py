"""Creating and deleting a 2000-partition topic never stalls the broker's event loop.

The metadata publisher used to open (and delete) every partition's log on the event
loop: a 2000-partition topic stalled the one-node broker ~20 s, requests waited that long
and the node missed its own heartbeats. Now a reconcile task does that file work in
worker threads, so a probe on another connection (an acks=1 produce every 5 ms, each with
a client timeout) is answered throughout, and the broker is never fenced.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.client.protocol import ApiKey
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection, values_batch
from tests.support import wait_until

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 2000
PROBE_TIMEOUT_S = 5.0  # the probe client's request timeout; the old stall was ~20 s


class Probe:
    """An acks=1 produce of one 100-byte message every 5 ms on its own connection."""

    def __init__(self, server: ServerProcess) -> None:
        self.conn = WireConnection(server.bootstrap, timeout=PROBE_TIMEOUT_S, client_id="probe")
        self.answered = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        batch = values_batch([b"p" * 100])
        while not self._stop.is_set():
            try:
                result = self.conn.produce("probe", 0, batch, acks=1)
                if result.error_code:
                    self.failures.append(f"error code {result.error_code}")
                else:
                    self.answered += 1
            except Exception as exc:  # a timeout: the broker did not answer in PROBE_TIMEOUT_S
                self.failures.append(f"{type(exc).__name__}: {exc}")
                return
            self._stop.wait(0.005)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=PROBE_TIMEOUT_S + 5)
        self.conn.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with running_server(tmp_path) as process:
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic("probe", 1) == 0
            wait_until(lambda: conn.produce("probe", 0, values_batch([b"x"]), acks=1).error_code == 0,
                       timeout=30, what="the probe partition to be ready")
        yield process


def _partition_dirs(server: ServerProcess, prefix: str) -> list[str]:
    data = server.directory / "data"
    return [p.name for p in data.iterdir() if p.name.startswith(prefix)]


def test_a_2000_partition_topic_is_created_and_deleted_without_stalling_the_broker(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap, timeout=120) as admin, Probe(server) as probe:
        response = admin.request(ApiKey.CREATE_TOPICS, 4, {
            "topics": [{"name": "wide", "num_partitions": PARTITIONS, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 60_000, "validate_only": False}, timeout=120)
        assert response.topics[0].error_code == 0
        # Every partition becomes writable (until its log is open: a retriable error).
        last = PARTITIONS - 1
        wait_until(lambda: admin.produce("wide", last, values_batch([b"w"]), acks=1).error_code == 0,
                   timeout=120, what="the topic's last partition to be writable")
        assert len(_partition_dirs(server, "wide-")) == PARTITIONS
        answered_during_create = probe.answered
        response = admin.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": ["wide"], "timeout_ms": 60_000},
                                 timeout=120)
        assert response.responses[0].error_code == 0
        wait_until(lambda: not _partition_dirs(server, "wide-"), timeout=120,
                   what="the deleted topic's directories to be removed")
        # Still answering after the deletion (the probe thread stops at its first timeout).
        wait_until(lambda: probe.answered > answered_during_create + 10 or probe.failures, timeout=30,
                   what="probes after the deletion")
    assert probe.failures == [], "every probe is answered, none times out"
    assert answered_during_create > 0
    for event in ("broker.fenced", "broker.reregistering", "broker.heartbeat_timed_out"):
        assert server.log_events(event) == [], f"the broker logged {event}"
    with WireConnection(server.bootstrap, timeout=PROBE_TIMEOUT_S) as conn:
        assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
