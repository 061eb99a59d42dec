"""Leader epoch -> start offset, as Kafka's LeaderEpochFileCache.

Persisted in `<partition dir>/leader-epoch-checkpoint` (Kafka's text format,
`0\\n<count>\\n<epoch> <start offset>\\n...`) after every change, or, when the owner
sets `on_deferred`, by `flush_deferred` in the owner's worker thread (the write fsyncs:
not on an event loop; Kafka likewise moved it off the append path, KAFKA-15046). A crash
before it loses nothing: opening a log rebuilds the epochs of the data above the recovery
point from its batch headers, and the log's flush writes this file before the recovery point. Entries are
kept with both epochs and start offsets strictly increasing.

`end_offset_for_epoch` answers OffsetsForLeaderEpoch exactly as Kafka does,
including the case of a requested epoch below the first cached one: Kafka
returns (requested epoch, start offset of the first cached epoch) there, so a
follower truncates to where the leader's retained history begins; (-1, -1)
(UNDEFINED) is returned only for epoch -1, an epoch above every cached one,
or an empty cache.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path

import structlog

from raftka.log.checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"

_log = structlog.get_logger(__name__)


class LeaderEpochCache:
    def __init__(self, path: Path) -> None:
        """Load the cache from `path` (empty if the file is missing).

        Raises CorruptCheckpoint if the file does not parse or its entries are
        not increasing.
        """
        self.path = Path(path)
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.on_deferred: Callable[[], None] | None = None
        self._dirty = False
        self._lock = threading.Lock()  # the entries, against a snapshot taken by flush_deferred
        entries = read_checkpoint(self.path, 2) or []
        for epoch_text, start_text in entries:
            try:
                epoch, start = int(epoch_text), int(start_text)
            except ValueError:
                raise CorruptCheckpoint(f"{self.path}: entry {epoch_text} {start_text} is not two integers") from None
            if self._epochs and (epoch <= self._epochs[-1] or start < self._starts[-1]):
                raise CorruptCheckpoint(
                    f"{self.path}: entry ({epoch}, {start}) does not follow ({self._epochs[-1]}, {self._starts[-1]})"
                )
            self._epochs.append(epoch)
            self._starts.append(start)

    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first."""
        with self._lock:
            return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        """The newest cached epoch, or -1 if the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[-1], self._starts[-1]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`. True if the cache changed.

        Re-assigning the latest epoch at a later offset is a no-op. Entries that
        would break monotonicity (epoch >= `epoch` or start >= `start_offset`)
        are removed first, as in Kafka. Raises ValueError for negative values.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch entry ({epoch}, {start_offset}): both must be >= 0")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        with self._lock:
            removed = self._assign(epoch, start_offset)
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            _log.warning(
                "leader_epoch_cache.truncated_conflicting",
                path=str(self.path),
                new_entry=(epoch, start_offset),
                removed=removed,
            )
        self._flush()
        return True

    def _assign(self, epoch: int, start_offset: int) -> list[tuple[int, int]]:
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._starts.pop()))
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return removed

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) per OffsetsForLeaderEpoch: the largest epoch <= requested and
        the start offset of the next epoch, or `log_end_offset` for the latest epoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries whose start offset is >= `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect_left(self._starts, end_offset)
        with self._lock:
            del self._epochs[keep:]
            del self._starts[keep:]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries below `start_offset`; the last of them is kept, moved up to `start_offset`."""
        below = bisect_right(self._starts, start_offset)
        if below == 0 or (below == 1 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[below - 1]
        with self._lock:
            del self._epochs[:below]
            del self._starts[:below]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)
        self._flush()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._starts.clear()
        self._flush()

    def _flush(self) -> None:
        if self.on_deferred is None:
            write_checkpoint(self.path, self.entries())
            return
        self._dirty = True
        self.on_deferred()

    @property
    def dirty(self) -> bool:
        """Changed since the file was last written (only with `on_deferred`)."""
        return self._dirty

    def flush_deferred(self) -> None:
        """Write the file if a deferred change is pending (thread-safe against the owner's
        changes; one writer at a time is the owner's business)."""
        with self._lock:
            if not self._dirty:
                return
            entries = list(zip(self._epochs, self._starts, strict=True))
            self._dirty = False
        try:
            write_checkpoint(self.path, entries)
        except BaseException:
            self._dirty = True
            raise
