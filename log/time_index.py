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

import struct
from array import array
from bisect import bisect_left, bisect_right

from raftka.log.offset_index import IndexFile

_ENTRY = struct.Struct(">qI")
_U32_MAX = (1 << 32) - 1


class TimeIndex(IndexFile):
    """Entries (timestamp, offset - base offset): timestamps strictly increasing, offsets not
    decreasing."""

    _ENTRY = _ENTRY
    _TYPECODES = ("q", "I")
    ENTRY_SIZE = _ENTRY.size

    @property
    def _timestamps(self) -> array[int]:
        return self._first

    @property
    def _relative(self) -> array[int]:
        return self._second

    def _follows(self, first: int, second: int) -> bool:
        return first > self._timestamps[-1] and second >= self._relative[-1]

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
        self._truncate(bisect_left(self._relative, max(0, offset - self.base_offset)))
