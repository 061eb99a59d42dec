"""`raftka metadata dump` on a real voter's files: while it runs, and after it stopped, its
image and digest are the ones the voter itself reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from raftka.raft_meta.metadata.metadata_dump import dump_json, read_metadata_log
from raftka.raft_meta.metadata.records import Config, Partition, Topic
from raftka.raft_meta.quorum.quorum import QuorumSettings, open_quorum
from raftka.testing.local_cluster import free_low_port
from tests.integration.quorum_procs import REPO

pytestmark = pytest.mark.timeout(120)

SECRET = "metadata-dump-test-secret"


async def test_dump_of_a_live_then_stopped_voter_matches_its_reported_digest(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_low_port(set())}"
    settings = QuorumSettings(snapshot_max_record_bytes=400)  # a few snapshots along the way
    async with open_quorum(1, {1: address}, SECRET, tmp_path, settings=settings) as quorum:
        await quorum.submit(Topic("t", "id-t"))
        await quorum.submit(Partition("id-t", 0, (1,), (1,), 1))
        for i in range(40):
            last = await quorum.submit(Config("topic", "t", "retention.ms", str(i)))
        assert quorum.snapshot_offset > 0
        live = await trio.to_thread.run_sync(read_metadata_log, tmp_path)  # read-only, no lock
        assert dump_json(live)["image_offset"] <= last
        with trio.fail_after(60):
            while quorum.image_state()["digest_offset"] != last:
                await trio.sleep(0.05)
        reported = quorum.image_state()["digest"]
    result = subprocess.run([sys.executable, "-m", "raftka", "metadata", "dump", "--metadata-dir", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["snapshot_offset"] > 0
    assert out["image_offset"] == last, (out["commit_index"], out["uncommitted"])
    assert out["image_digest"] == reported
    assert out["image"]["configs"] == [{"resource_type": "topic", "resource_name": "t",
                                        "configs": {"retention.ms": "39"}}]
    bad = subprocess.run([sys.executable, "-m", "raftka", "metadata", "dump", "--metadata-dir", str(REPO / "docs")],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "expected a node's metadata.log.dir" in bad.stderr


async def test_a_cleanly_stopped_voter_has_stored_its_last_commit_index(tmp_path: Path) -> None:
    """pysyncobj stores the commit index (raft.journal.meta) once a second: a voter stopped
    within that second must still store it, or its files show its last commits as uncommitted."""
    address = f"127.0.0.1:{free_low_port(set())}"
    async with open_quorum(1, {1: address}, SECRET, tmp_path) as quorum:
        await quorum.submit(Topic("t", "id-t"))
        for i in range(3):
            last = await quorum.submit(Config("topic", "t", "retention.ms", str(i)))
    view = await trio.to_thread.run_sync(read_metadata_log, tmp_path)
    assert view.commit_index == last, [offset for offset, _, _ in view.uncommitted]
    assert not view.uncommitted
