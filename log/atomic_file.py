"""Replacing a small file whole, and making directory changes durable.

`atomic_write` is the tmp-file + fsync + rename + directory-fsync sequence (Kafka's
`Utils.atomicMoveWithFallback` after a synced write): a crash leaves either the old file or
the new one, never a mix. The rename is atomic on POSIX file systems; the file fsync makes
the new bytes durable before the name points at them, the directory fsync makes the rename
itself durable. A tmp file left by a crash is the owner's to remove when it starts.

Blocking I/O: server code calls these from a worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and unlinks in `directory` durable (the entries live in it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, tmp: Path | None = None, durable: bool = True,
                 mode: int = 0o644) -> None:
    """Replace `path` with `data`: write `tmp` (default `<name>.tmp` beside it), fsync it,
    rename it over `path`, fsync the directory.

    With `durable=False` both fsyncs are skipped: a killed process still never leaves a
    half-written `path`, but a power loss may lose the write (or, on some file systems,
    leave an empty file)."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX) if tmp is None else Path(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)
