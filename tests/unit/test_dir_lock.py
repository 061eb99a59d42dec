"""log/dir_lock.py: one process per data directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from raftka.log.dir_lock import LOCK_FILE, DirLock, DirLocked, lock_dirs


def test_a_second_holder_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    with DirLock(tmp_path / "data") as first:
        assert first.held and (tmp_path / "data" / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        with pytest.raises(DirLocked) as refused:
            DirLock(tmp_path / "data").acquire()
        assert f"{tmp_path / 'data'} is in use by another raftka process (pid {os.getpid()})" in str(refused.value)
    DirLock(tmp_path / "data").acquire().release()  # released with its holder


def test_another_process_is_refused_and_a_dead_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    code = ("import sys; from raftka.log.dir_lock import DirLock, DirLocked\n"
            "try:\n    DirLock(sys.argv[1]).acquire()\nexcept DirLocked as e:\n    print(e); sys.exit(3)\n")
    with DirLock(tmp_path):
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert other.returncode == 3 and f"pid {os.getpid()}" in other.stdout
    # A holder that died without releasing: the kernel dropped its lock with its descriptors.
    holder = subprocess.Popen([sys.executable, "-c", code + "import time; time.sleep(60)\n", str(tmp_path)])
    try:
        from tests.support import wait_until

        wait_until(lambda: (tmp_path / LOCK_FILE).read_text().strip() == str(holder.pid), timeout=30,
                   what="the other process to take the lock")
        with pytest.raises(DirLocked):
            DirLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    DirLock(tmp_path).acquire().release()


def test_lock_dirs_takes_all_or_none(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "a"]  # a repeated dir is locked once
    with DirLock(tmp_path / "b"), pytest.raises(DirLocked):
        with lock_dirs(dirs):
            pass
    with DirLock(tmp_path / "a") as a:
        assert a.held  # the refusal above released "a" again
    with lock_dirs(dirs) as locks:
        assert len(locks) == 2 and all(lock.held for lock in locks)
