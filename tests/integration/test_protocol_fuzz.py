"""The protocol fuzzer against a real broker process, bounded for `make test`.

A few thousand mutated frames of every advertised API (tests/fuzz/), seeded; the seed is
printed and named in every failure, and `python -m tests.fuzz --seed S --start N
--frames 1` replays one frame. `make fuzz N=1000000` is the long run.

Also here: the bugs the fuzzer found, each as a plain regression test.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
import trio

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.server_process import ServerProcess, running_server
from tests.compat.wire_client import WireConnection
from tests.fuzz.mutate import PROTOCOL_KINDS, Mutator
from tests.fuzz.runner import (
    FUZZ_PROPERTIES,
    fuzz,
    limit_memory,
    prepare_topics,
    rss_bytes,
    verdict,
)

FRAMES = int(os.environ.get("RAFTKA_FUZZ_FRAMES", "3000"))
SEED = int(os.environ.get("RAFTKA_FUZZ_SEED") or random.randrange(2**32))


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("fuzz"), properties=FUZZ_PROPERTIES) as server:
        limit_memory(server.pid)  # a runaway allocation fails in the broker, not on the machine
        prepare_topics(server.bootstrap)
        yield server


def _run(server: ServerProcess, kinds: frozenset[str], frames: int, *, check_stored: bool, label: str) -> None:
    print(f"fuzz seed {SEED} ({label}): replay with RAFTKA_FUZZ_SEED={SEED}")
    log_offset = server.log_path.stat().st_size
    host, port = server.bootstrap.rsplit(":", 1)
    mutator = Mutator(SEED, kinds)
    stats = trio.run(lambda: fuzz((host, int(port)), mutator, 0, frames, pid=server.pid))
    print(f"fuzz: {stats.summary()}")
    result = verdict(server, stats, log_offset, check_stored=check_stored,
                     round_trip_topic=f"fuzz-{label}-round-trip-{SEED}")
    failures = result.failures()
    assert not failures, f"fuzz seed {SEED} ({stats.summary()}): " + "; ".join(failures)


def test_fuzzed_requests_leave_the_broker_up_bounded_and_serving(fuzz_server: ServerProcess) -> None:
    """Every mutation but CRC-valid malformed batches: alive, RSS bounded, a round trip works,
    no error-level log line, and nothing malformed stored."""
    _run(fuzz_server, PROTOCOL_KINDS, FRAMES, check_stored=True, label="protocol")


def test_fuzzed_record_batches_store_nothing_malformed(fuzz_server: ServerProcess) -> None:
    """Produce requests whose batches are malformed inside but carry a valid CRC (record
    lengths, varints, header counts, key/value bounds, deltas, counts, compression): the
    broker must refuse every one (CORRUPT_MESSAGE / INVALID_RECORD) and store none."""
    _run(fuzz_server, frozenset({"batch", "none"}), max(FRAMES // 3, 500), check_stored=True, label="batches")


# -- what the fuzzer found -------------------------------------------------------------

@pytest.mark.parametrize(("api_key", "version", "body", "expected_error"), [
    # num_partitions 2^31-1: the controller placed every partition in memory, on the event loop
    # (the broker reached 21 GB and answered nothing). Kafka caps one request at 10 000 records.
    (ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1,
                                           "assignments": [], "configs": []}],
                               "timeout_ms": 5000, "validate_only": False}, ErrorCode.POLICY_VIOLATION),
    (ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1,
                                           "assignments": [], "configs": []}],
                               "timeout_ms": 5000, "validate_only": True}, ErrorCode.POLICY_VIOLATION),
    # the fuzzer's own frame: seed 1, frame 675 (validate_only)
    (ApiKey.CREATE_PARTITIONS, 1, {"topics": [{"name": "fuzz-b", "count": 1_782_741_552, "assignments": None}],
                                   "timeout_ms": 5000, "validate_only": True}, ErrorCode.POLICY_VIOLATION),
    (ApiKey.CREATE_PARTITIONS, 1, {"topics": [{"name": "fuzz-b", "count": 2**31 - 1, "assignments": None}],
                                   "timeout_ms": 5000, "validate_only": False}, ErrorCode.POLICY_VIOLATION),
])
def test_a_request_for_billions_of_partitions_is_refused(tmp_path, api_key: ApiKey, version: int, body: dict,
                                                          expected_error: int) -> None:
    with running_server(tmp_path) as server:
        limit_memory(server.pid)
        prepare_topics(server.bootstrap)
        rss_before = rss_bytes(server.pid)
        with WireConnection(server.bootstrap, timeout=60) as conn:
            response = conn.request(api_key, version, body)
            results = response.topics if api_key == ApiKey.CREATE_TOPICS else response.results
            assert results[0].error_code == expected_error, results[0]
            assert "MAX_RECORDS_PER_USER_OP" in results[0].error_message
            assert conn.request(ApiKey.API_VERSIONS, 2, {}).error_code == 0
        assert rss_bytes(server.pid) - rss_before < 32 << 20
        assert not [line for line in server.log_path.read_text().splitlines() if '"level": "error"' in line]
