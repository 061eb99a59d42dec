"""OffsetCommit v7-v10 and OffsetFetch v1-v10 against a real raftka server, case by case, held
to what Kafka 4.4 answered (tests/compat/offset_api_cases.py; the differential suite checks the
same cases against a Kafka 4.4 broker): v9's GROUP_ID_NOT_FOUND and KIP-848 member epochs
(STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION below v9), OffsetFetch v8's
batched groups and v10's topic ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from tests.compat.offset_api_cases import KAFKA_44, lines
from tests.compat.server_process import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "server", properties={"offsets.topic.num.partitions": "1"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_offset_commit_and_fetch_answer_each_version_as_kafka(server: ServerProcess) -> None:
    assert ADVERTISED_VERSIONS[ApiKey.OFFSET_COMMIT][1] >= 10
    assert ADVERTISED_VERSIONS[ApiKey.OFFSET_FETCH][1] >= 10
    got = lines(server.bootstrap)
    assert got == KAFKA_44, "\n".join(
        f"{'  ' if g == k else '! '}{g}\n{'' if g == k else '  kafka: ' + k}" for g, k in zip(got, KAFKA_44, strict=False))
