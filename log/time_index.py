"""The sparse time index of one segment: `<base offset>.timeindex`, Kafka's format.

Each 12-byte entry is a timestamp i64 then (offset - base offset) u32,
big-endian: "the largest timestamp among the batches up to this offset is
T, first reached by the batch holding this offset". Timestamps strictly
increase from entry to entry, so batches before an entry's offset all carry
smaller maxTimestamps. An entry is added alongside each offset-index entry
when the segment's max timestamp grew, and once more when the segment is
rolled or closed so the last entry always holds the segment's max timestamp.

Kept in memory and written like the offset index: no descriptor held, new entries
appended on flush and close, truncations cut the file at once.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from raftka.log.offset_index import CorruptIndex, cut_entries, write_entries

_ENTRY = struct.Struct(">qI")
_U32_MAX = (1 << 32) - 1


class TimeIndex:
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        """Open (creating if missing) and load the index at `path`.

        Raises CorruptIndex when the file size is not a multiple of 12 or the
        timestamps / offsets go backwards.
        """
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._timestamps = array("q")
        self._relative = array("I")
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndex(
                f"{self.path.name}: size {len(data)} is not a multiple of the {self.ENTRY_SIZE}-byte entry"
            )
        for ts, rel in _ENTRY.iter_unpack(data):
            if self._timestamps and (ts <= self._timestamps[-1] or rel < self._relative[-1]):
                raise CorruptIndex(
                    f"{self.path.name}: entry {len(self._timestamps)} ({ts}, {rel}) does not follow "
                    f"({self._timestamps[-1]}, {self._relative[-1]})"
                )
            self._timestamps.append(ts)
            self._relative.append(rel)
        self._written = len(self._timestamps)  # entries in the file
        if not self.path.exists():
            write_entries(self.path, 0, b"", fsync=False)

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._timestamps, self._relative, strict=True)]

    def maybe_append(self, timestamp: int, offset: int, *, force: bool = False) -> bool:
        """Add (timestamp, offset) if `timestamp` is above the last entry's. True if added.

        `force` ignores the size limit (the final entry written on roll/close).
        """
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return False
        rel = offset - self.base_offset
        if not 0 <= rel <= _U32_MAX:
            raise ValueError(
                f"{self.path.name}: offset {offset} is outside the u32 range of base offset {self.base_offset}"
            )
        if self._relative and rel < self._relative[-1]:
            raise ValueError(
                f"{self.path.name}: offset {offset} is below the last indexed offset {self.last_entry[1]}"
            )
        if self.is_full and not force:
            return False
        self._timestamps.append(timestamp)
        self._relative.append(rel)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= `timestamp`; (-1, base) if none."""
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._relative[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for offsets at or beyond `offset`."""
        keep = bisect_left(self._relative, max(0, offset - self.base_offset))
        if keep >= len(self._timestamps):
            return
        del self._timestamps[keep:]
        del self._relative[keep:]
        if self._written > keep:
            cut_entries(self.path, keep * self.ENTRY_SIZE)
            self._written = keep

    def reset(self) -> None:
        self.truncate_to_offset(self.base_offset)

    def _pending(self) -> bytes:
        return b"".join(_ENTRY.pack(t, r) for t, r in zip(self._timestamps[self._written:],
                                                          self._relative[self._written:], strict=True))

    def flush(self) -> None:
        """Write the new entries and fsync the file."""
        count = len(self._timestamps)
        write_entries(self.path, self._written * self.ENTRY_SIZE, self._pending(), fsync=True)
        self._written = count

    def close(self) -> None:
        """Write the new entries (no fsync: a clean close leaves the file exact)."""
        count = len(self._timestamps)
        if count > self._written:
            write_entries(self.path, self._written * self.ENTRY_SIZE, self._pending(), fsync=False)
            self._written = count

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)
