"""Each voter reports its metadata image (offset and digest) over the admin channel
(`raftka quorum status --json`), computed off the tick thread and the trio loop."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.records import Config, Partition, Topic
from raftka.raft_meta.metadata.snapshot import image_digest
from raftka.raft_meta.quorum.quorum import open_quorum
from raftka.raft_meta.quorum.quorum_admin import query_voter
from raftka.testing.local_cluster import free_low_port

pytestmark = pytest.mark.timeout(120)

SECRET = "image-status-test-secret"


async def _status(address: str):
    return await trio.to_thread.run_sync(lambda: query_voter(1, address, SECRET, {address: 1}, timeout=5.0))


async def test_status_reports_the_digest_of_the_image_at_the_last_applied_offset(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_low_port(set())}"
    async with open_quorum(1, {1: address}, SECRET, tmp_path) as quorum:
        for record in (Topic("t", "id-t"), Partition("id-t", 0, (1,), (1,), 1, leader_epoch=3),
                       Config("topic", "t", "retention.ms", "1000")):
            last = await quorum.submit(record)
        expected = image_digest(replay([(r.offset, r.decode()) for r in quorum.records_from(0)]))
        with trio.fail_after(60):
            while True:
                status = await _status(address)
                if status.image_digest_offset == last:
                    break
                await trio.sleep(0.05)
        assert status.reachable and status.state == "leader"
        assert status.image_offset == last == quorum.last_offset
        assert status.image_digest == expected
        # A change gives a new digest at the new offset.
        newer = await quorum.submit(Config("topic", "t", "retention.ms", "2000"))
        with trio.fail_after(60):
            while (status := await _status(address)).image_digest_offset != newer:
                await trio.sleep(0.05)
        assert status.image_digest != expected
        assert status.image_digest == image_digest(replay([(r.offset, r.decode()) for r in quorum.records_from(0)]))
