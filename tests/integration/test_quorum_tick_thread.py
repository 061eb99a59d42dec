"""Regression: pysyncobj's tick thread must outlive trio's idle worker threads.

pysyncobj stops ticking as soon as the thread that created the SyncObj
exits; trio's worker threads exit after ~10 s idle. A quorum created in a
worker thread therefore went silent ~10 s after start (commits timed out).
"""

import threading

import trio

from raftka.raft_meta.quorum.quorum import open_quorum
from tests.support import free_port


async def test_syncobj_is_owned_by_the_trio_thread(tmp_path):
    port = free_port()
    async with open_quorum(1, {1: f"127.0.0.1:{port}"}, "tick-thread-test-secret", tmp_path) as quorum:
        owner = quorum._sync._SyncObj__mainThread  # the thread whose life bounds the tick thread
        assert owner is threading.current_thread()
        with trio.fail_after(10):
            while not quorum.is_leader:
                await quorum.wait_state_change()
