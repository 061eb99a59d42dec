"""An exclusive lock on a data directory, held for the life of the process.

Two processes on one log dir corrupt it: both append to the same segments,
each serving the other's records as corrupt batches (seen when a second
`raftka cluster up` was started on the same `./cluster-data`). As Kafka does,
every log dir and the metadata dir get a `.lock` file locked with
`flock(LOCK_EX | LOCK_NB)`; the holder's pid is written into it so the
refusal can name who holds it. The lock goes with the process (its file
descriptor), so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

LOCK_FILE = ".lock"


class DirLocked(RuntimeError):
    """The directory is locked by another process."""

    def __init__(self, directory: Path, holder: str) -> None:
        super().__init__(f"{directory} is in use by another raftka process ({holder}); "
                         "expected one process per directory: stop that one or use another directory")
        self.directory = directory
        self.holder = holder


class DirLock:
    """`acquire()` the lock of `directory` (created if missing); `release()` or process exit frees it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DirLock:
        if self._fd is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DirLocked(self.directory, f"pid {holder}" if holder.isdigit() else "pid unknown") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def lock_dirs(directories: Iterable[str | os.PathLike[str]]) -> Iterator[list[DirLock]]:
    """Lock every directory (each once, in a stable order) or none: on a refusal the locks
    already taken are released and DirLocked propagates."""
    unique = sorted({Path(d).resolve() for d in directories})
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(DirLock(d)) for d in unique]
