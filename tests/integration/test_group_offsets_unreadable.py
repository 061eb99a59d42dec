"""A group coordinator that meets an unreadable batch in its `__consumer_offsets`
partition logs it loudly, skips it and still loads (issue 17, finding 2).

Before, one such batch (a client could produce it) failed the whole load after the
next restart, and OffsetFetch answered COORDINATOR_LOAD_IN_PROGRESS for ever. Here
the node is stopped, a batch whose CRC is valid but whose first record lies about its
length is written straight into the partition's segment, followed by a good commit,
and the node is started again on the same data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.broker.group.group_records import offset_key, offset_value
from raftka.broker.group.group_state import CommittedOffset
from raftka.client.protocol import ErrorCode
from raftka.log.batch_header import HEADER_SIZE, iter_headers, update_crc
from raftka.log.record_batch import Record, encode_batch
from tests.compat.server_process import ServerProcess, server_with_topics
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TOPIC = "consumed"
TIMEOUT = 30.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with server_with_topics(tmp_path, {TOPIC: 2}) as process:
        yield process


def committed(conn: WireConnection, group: str) -> dict[int, int] | None:
    """The group's committed offsets, or None while the coordinator is not ready."""
    response = conn.fetch_offsets(group, TOPIC, [0, 1])
    if response.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                               ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return None
    assert response.error_code == 0, response
    return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}


def append_to_segment(segment: Path, batch: bytes) -> None:
    """Write `batch` at the end of `segment` with the next offset and the last batch's epoch."""
    data = segment.read_bytes()
    last = list(iter_headers(data))[-1]
    moved = bytearray(batch)
    moved[0:8] = last.next_offset.to_bytes(8, "big")  # baseOffset and the epoch lie outside the CRC
    moved[12:16] = last.partition_leader_epoch.to_bytes(4, "big", signed=True)
    with open(segment, "ab") as out:
        out.write(moved)


def poisoned_batch() -> bytes:
    """A CRC-valid batch whose first record claims 11 bytes where it has 8 (what a client
    could produce into __consumer_offsets before issue 17)."""
    batch = bytearray(encode_batch([Record(None, b"vv"), Record(None, b"ww")]))
    assert batch[HEADER_SIZE] == 8 << 1  # zigzag(8): the first record's length
    batch[HEADER_SIZE] = 11 << 1
    update_crc(batch)
    assert list(iter_headers(bytes(batch), verify=True))  # the CRC is fine
    return bytes(batch)


def test_unreadable_batch_is_skipped_and_the_partition_still_loads(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        wait_until(lambda: conn.find_coordinator("g1").error_code == 0, timeout=TIMEOUT,
                   what="a group coordinator (it creates __consumer_offsets)")
        wait_until(lambda: conn.commit_offsets("g1", TOPIC, {0: 10, 1: 11}) == {0: 0, 1: 0},
                   timeout=TIMEOUT, what="g1's commit")
        assert conn.commit_offsets("g2", TOPIC, {0: 5}) == {0: 0}
    assert server.stop() == 0

    (segment,) = server.directory.glob("**/__consumer_offsets-0/*.log")
    append_to_segment(segment, poisoned_batch())
    # A good commit after the bad batch: the load must go on past it, not stop there.
    later = encode_batch([Record(offset_key("g3", TOPIC, 1), offset_value(CommittedOffset(33)))])
    append_to_segment(segment, later)

    server.start()
    with WireConnection(server.bootstrap) as conn:
        offsets = wait_until(lambda: committed(conn, "g1"), timeout=TIMEOUT,
                             what="__consumer_offsets-0 to load (OffsetFetch without LOAD_IN_PROGRESS)")
        assert offsets == {0: 10, 1: 11}
        assert committed(conn, "g2") == {0: 5, 1: -1}
        assert committed(conn, "g3") == {0: -1, 1: 33}
        # The coordinator works on: a new commit lands and reads back.
        assert conn.commit_offsets("g2", TOPIC, {1: 6}) == {1: 0}
        assert committed(conn, "g2") == {0: 5, 1: 6}
    events = server.logged("group_metadata.corrupt_batch")
    assert events[-1]["level"] == "error", events
    assert "length is 11" in events[-1]["error"]
