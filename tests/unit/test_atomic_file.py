"""log/atomic_file.py: a file is replaced whole or not at all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from raftka.log.atomic_file import atomic_write, fsync_dir


@pytest.mark.parametrize("durable", [True, False])
@pytest.mark.parametrize("existing", [None, b"old contents, longer than the new ones"])
def test_replaces_the_file_whole_and_leaves_no_tmp(tmp_path: Path, durable: bool, existing: bytes | None):
    path = tmp_path / "checkpoint"
    if existing is not None:
        path.write_bytes(existing)
    atomic_write(path, b"new", durable=durable)
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_a_named_tmp_file_is_used_and_renamed(tmp_path: Path):
    final, tmp = tmp_path / "00000000000000000005.snapshot", tmp_path / "00000000000000000005.snapshot.tmp"
    atomic_write(final, b"\x00" * 100_000, tmp=tmp)
    assert final.read_bytes() == b"\x00" * 100_000 and not tmp.exists()


def test_a_failed_write_leaves_the_old_file(tmp_path: Path):
    path = tmp_path / "meta.properties"
    path.write_bytes(b"old")
    with pytest.raises(FileNotFoundError):
        atomic_write(path, b"new", tmp=tmp_path / "missing-dir" / "meta.properties.tmp")
    assert path.read_bytes() == b"old"


def test_mode_of_a_new_file(tmp_path: Path):
    path = tmp_path / "f"
    old = os.umask(0)
    try:
        atomic_write(path, b"x", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_fsync_dir(tmp_path: Path):
    fsync_dir(tmp_path)
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "missing")
