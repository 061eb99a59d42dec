"""Strays: what a node found in its log dirs and could not explain, set aside and kept.

Kafka never deletes on inference, and neither do we. A partition directory the
metadata image does not give this broker (its topic was deleted while the node
was down, or it was reassigned away) or that holds an earlier incarnation of a
topic re-created under the same name is renamed
`<topic>-<partition>.<uuid hex>-stray` (`move_strays_aside`, Kafka's
`UnifiedLog.StrayDirSuffix`), with a `stray-reason` file inside saying when and
why. A segment file that crash recovery could not fit in the log (the segments
after a cut, the bytes cut from a flushed segment) is renamed
`<name>.<hex>.stray` inside its partition directory (log/partition_log.py).

The broker never opens, serves, counts, or removes a stray: its name is not a
partition's (`parse_partition_dir`) nor a segment's. `find_strays` lists them for
`raftka storage strays`, which removes them (`remove_stray`) only while the node
is stopped and its directories are locked by the command.

Plain file-system code; callers run it off the event loop.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from raftka.log.atomic_file import atomic_write, fsync_dir
from raftka.log.partition_metadata import (
    STRAY_SUFFIX,
    log_dir_children,
    parse_partition_dir,
    parse_renamed_dir,
    renamed_dir,
    stray_partition_dirs,
)
from raftka.log.segment import STRAY_FILE_SUFFIX

REASON_FILE = "stray-reason"

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Stray:
    path: Path
    kind: str  # "partition" (a renamed directory) or "segment" (a file inside a partition directory)
    size_bytes: int
    renamed_at_ms: int | None  # from the reason file; else the file system's change time
    reason: str | None  # recorded for directories; segment files: see the log's log.recovery.* events


def move_strays_aside(log_dirs: Iterable[Path], expected: Mapping[tuple[str, int], str],
                      protected: frozenset[Path], now_ms: int) -> list[tuple[Path, Path]]:
    """Rename every stray partition directory (`stray_partition_dirs`) aside and keep it;
    each rename is logged as a warning (`log.stray_renamed`). Returns (old, new) per rename.
    A directory that cannot be renamed is logged (`log.stray_rename_failed`) and left alone."""
    moved = []
    for directory, why in stray_partition_dirs(log_dirs, expected, protected):
        target = renamed_dir(directory, STRAY_SUFFIX)
        try:
            os.rename(directory, target)
            fsync_dir(target.parent)
        except OSError as exc:
            _log.error("log.stray_rename_failed", dir=str(directory), reason=why, error=str(exc))
            continue
        try:
            atomic_write(target / REASON_FILE, f"renamed_at_ms: {now_ms}\nreason: {why}\n".encode())
        except OSError as exc:  # the directory is aside and kept all the same
            _log.warning("log.stray_reason_unwritten", dir=str(target), error=str(exc))
        _log.warning("log.stray_renamed", dir=str(directory), renamed_to=target.name, reason=why,
                     action="kept; list or remove it with `raftka storage strays`")
        moved.append((directory, target))
    return moved


def find_strays(log_dirs: Iterable[Path], protected: frozenset[Path] = frozenset()) -> list[Stray]:
    """Every stray under `log_dirs`: `-stray` partition directories, and `.stray` files
    inside partition directories. Sorted by path."""
    found = []
    for directory in log_dir_children(log_dirs, protected):
        renamed = parse_renamed_dir(directory.name)
        if renamed is not None and renamed[2] == STRAY_SUFFIX:
            found.append(_stray_dir(directory))
        elif parse_partition_dir(directory.name) is not None:
            found.extend(_stray_files(directory))
    return found


def remove_stray(stray: Stray) -> None:
    """Remove a stray for good (the operator's decision; the node must be stopped)."""
    if stray.kind == "partition":
        shutil.rmtree(stray.path)
    else:
        stray.path.unlink(missing_ok=True)
    fsync_dir(stray.path.parent)


def _stray_dir(directory: Path) -> Stray:
    size = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    fields = {}
    try:
        text = (directory / REASON_FILE).read_text(encoding="utf-8")
        fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}
    except (OSError, UnicodeDecodeError):
        pass
    at = fields.get("renamed_at_ms", "")
    renamed_at = int(at) if at.isdigit() else _ctime_ms(directory)
    return Stray(directory, "partition", size, renamed_at, fields.get("reason") or None)


def _stray_files(part_dir: Path) -> list[Stray]:
    out = []
    try:
        entries = sorted(os.scandir(part_dir), key=lambda e: e.name)
    except OSError:
        return out
    for entry in entries:
        if entry.name.endswith(STRAY_FILE_SUFFIX) and entry.is_file(follow_symlinks=False):
            path = Path(entry.path)
            out.append(Stray(path, "segment", entry.stat(follow_symlinks=False).st_size, _ctime_ms(path), None))
    return out


def _ctime_ms(path: Path) -> int | None:
    try:
        return int(path.lstat().st_ctime * 1000)  # a rename updates the change time
    except OSError:
        return None
