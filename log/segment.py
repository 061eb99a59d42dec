"""One log segment: `<20-digit base offset>.log` with its `.index`, `.timeindex` and `.txnindex`.

The `.log` file holds whole RecordBatch v2 batches back to back, exactly as
written. The segment only ever reads batch *headers* (via log.batch_header
over a read-only mmap of the file); records are never decoded here.

Indexing follows Kafka's LogSegment.append: before each batch, if more than
`index.interval.bytes` were written since the last offset-index entry, the
batch gets an entry (base offset -> position) and the time index gets
(max timestamp so far, offset of that timestamp) if the max grew.

A segment is opened either trusted (`load`: indexes are sanity-checked, then
only the tail after the last index entry is scanned, headers only) or
untrusted (`recover`: every batch's length, magic, CRC and offset order are
checked, the first bad byte and everything after it are cut off, and both
indexes are rebuilt from the scan).
"""

from __future__ import annotations

import mmap
import os
import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from raftka.log.atomic_file import atomic_write
from raftka.log.batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    parse_header,
    verify_crc,
)
from raftka.log.config import LogConfig
from raftka.log.errors import CorruptRecord, InvalidRecord, LogError
from raftka.log.offset_index import CorruptIndex, OffsetIndex
from raftka.log.time_index import TimeIndex
from raftka.log.txn_index import TXN_INDEX_SUFFIX, CorruptTxnIndex, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
# A segment file (or the bytes cut from one) that crash recovery could not fit in the log:
# set aside and kept for an operator (`raftka storage strays`), never read as a segment.
STRAY_FILE_SUFFIX = ".stray"

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_READ_PREFIX = struct.Struct(">qiibIhi")

# A batch header this close to the end of the segment, past its mapping, is read with
# pread; one further back renews the mapping (one remap then serves the whole read).
TAIL_PREAD_BYTES = 64 * 1024

# Relative offsets are stored as u32 in the indexes; Kafka keeps them within an int32.
MAX_RELATIVE_OFFSET = (1 << 31) - 1


def file_stem(base_offset: int) -> str:
    """Kafka's file name for a segment: the base offset, zero-padded to 20 digits."""
    return f"{base_offset:020d}"


def parse_file_stem(name: str) -> int | None:
    """The base offset a segment file name encodes, or None if it is not one of ours."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """Whole batches found in one segment: bytes [position, position+length)."""

    position: int
    length: int
    first_offset: int  # base offset of the first batch
    next_offset: int  # offset after the last batch
    stopped: bool  # True if max_bytes or max_offset stopped the read inside this segment


_IOV_MAX = 1024  # the kernel's limit on buffers per writev


class LogSegment:
    """A segment's files and the state derived from them. Not thread-safe."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        """Open (creating if missing) the segment's `.log`; indexes are opened by `load`/`recover`."""
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.config = config
        self.log_path = self.directory / (file_stem(base_offset) + LOG_SUFFIX)
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = open(fd, "r+b", buffering=0)  # lives as long as the segment
        self.size = os.fstat(self.file.fileno()).st_size
        self.index: OffsetIndex | None = None
        self.time_index: TimeIndex | None = None
        self.txn_index: TransactionIndex | None = None
        # True when the `.txnindex` must be rebuilt by replaying the log (recovered segment,
        # or an index file missing or corrupt); the partition log does it and clears this.
        self.txn_index_rebuild = False
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_ms: int | None = None
        self._bytes_since_index_entry = 0
        self._mm: mmap.mmap | None = None
        self._mm_size = 0

    # -- opening ------------------------------------------------------------

    @property
    def index_path(self) -> Path:
        return self.directory / (file_stem(self.base_offset) + INDEX_SUFFIX)

    @property
    def time_index_path(self) -> Path:
        return self.directory / (file_stem(self.base_offset) + TIME_INDEX_SUFFIX)

    @property
    def txn_index_path(self) -> Path:
        return self.directory / (file_stem(self.base_offset) + TXN_INDEX_SUFFIX)

    def _open_indexes(self) -> None:
        self._close_indexes()
        self.index = OffsetIndex(self.index_path, self.base_offset, self.config.segment_index_bytes)
        self.time_index = TimeIndex(self.time_index_path, self.base_offset, self.config.segment_index_bytes)
        try:
            self.txn_index = TransactionIndex(self.txn_index_path)
        except CorruptTxnIndex:
            self.txn_index_path.unlink(missing_ok=True)
            self.txn_index = TransactionIndex(self.txn_index_path)
            self.txn_index_rebuild = True
        if self.txn_index.created and self.size:
            self.txn_index_rebuild = True  # deleted, or written before transactions existed

    def load(self) -> None:
        """Open a segment whose bytes are trusted (below the recovery point).

        Raises CorruptIndex if an index file is inconsistent with the log, and
        CorruptRecord if the tail after the last index entry does not parse;
        the caller then falls back to `recover`.
        """
        if self.size and not (self.index_path.exists() and self.time_index_path.exists()):
            raise CorruptIndex(f"{self.log_path.name}: an index file is missing")
        self._open_indexes()
        assert self.index is not None and self.time_index is not None
        last_offset, last_position = self.index.last_entry
        if len(self.index) and last_position >= self.size:
            raise CorruptIndex(
                f"{self.index_path.name}: last entry points at position {last_position}, "
                f"beyond the log size {self.size}"
            )
        if len(self.index) and self.header_at(last_position).base_offset != last_offset:
            raise CorruptIndex(f"{self.index_path.name}: last entry ({last_offset}, {last_position}) "
                               "does not point at the start of that batch")
        ts, ts_offset = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        self.next_offset = max(self.base_offset, last_offset)
        scanned = last_position
        for header in self.iter_headers(last_position):
            self._track(header)
            scanned = header.position + header.size
        if scanned != self.size:
            raise CorruptRecord(f"{self.log_path.name}: batches end at {scanned}, file size is {self.size}")
        if ts_offset >= self.next_offset and len(self.time_index):
            raise CorruptIndex(
                f"{self.time_index_path.name}: last entry offset {ts_offset} is beyond the log end {self.next_offset}"
            )
        self._bytes_since_index_entry = self.size - last_position
        self._load_rolling_base()

    def recover(self, *, keep_cut: bool = False) -> int:
        """Validate every batch (length, magic, CRC, offsets), cut a bad tail, rebuild the indexes.

        With `keep_cut`, the bytes cut are first copied (and fsynced) to a stray file beside
        the segment (`<name>.cut-at-byte-<position>.<hex>.stray`): a bad batch may be a flipped
        bit with good batches behind it, and those are kept for an operator.
        Returns the number of bytes truncated.
        """
        for path in (self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        self._open_indexes()
        assert self.txn_index is not None
        self.txn_index.reset()  # rebuilt by the partition log's replay
        self.txn_index_rebuild = True
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index_entry = 0
        buf = self._map()
        position = 0
        while position < self.size:
            try:
                header = parse_header(buf, position)
                verify_crc(buf, header)
                if header.base_offset < self.next_offset:
                    raise CorruptRecord(
                        f"batch at position {position} has base offset {header.base_offset}, "
                        f"expected at least {self.next_offset}"
                    )
            except LogError:
                break
            self._index_batch(header, position)
            self._track(header)
            position += header.size
        truncated = self.size - position
        if truncated:
            if keep_cut:
                self._copy_aside(buf, position)
            self._unmap()
            os.ftruncate(self.file.fileno(), position)
            self.size = position
        self._load_rolling_base()
        return truncated

    def _copy_aside(self, buf: mmap.mmap | bytes, position: int) -> Path:
        target = self.log_path.with_name(
            f"{self.log_path.name}.cut-at-byte-{position}.{uuid.uuid4().hex[:8]}{STRAY_FILE_SUFFIX}")
        atomic_write(target, bytes(buf[position:self.size]))
        return target

    def _load_rolling_base(self) -> None:
        # Kafka's rule after a restart: time-based rolling counts from the first batch's timestamp.
        self.rolling_base_ms = self.header_at(0).max_timestamp if self.size else None

    # -- writing ------------------------------------------------------------

    def append(self, data: bytes | bytearray, headers: Sequence[BatchHeader], now_ms: int) -> None:
        """Write `data` (whole batches, offsets already assigned) with one write.

        `headers` are the batches' headers with positions relative to `data`.
        """
        self.append_pieces([data], headers, len(data), now_ms)

    def append_pieces(self, pieces: Sequence[bytes | bytearray | memoryview], headers: Sequence[BatchHeader],
                      length: int, now_ms: int) -> None:
        """Write `pieces` back to back (`length` bytes of whole batches) with vectored writes,
        so a producer's record bytes are never copied into one buffer first.

        `headers` are the batches' headers with positions relative to the start of the pieces.
        """
        if not headers:
            return
        start = self.size
        views = [memoryview(p).cast("B") for p in pieces if len(p)]
        written = 0
        while views:
            n = os.pwritev(self.file.fileno(), views[:_IOV_MAX], start + written)
            written += n
            while views and n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            if views and n:
                views[0] = views[0][n:]
        for header in headers:
            self._index_batch(header, start + header.position)
            self._track(header)
        self.size = start + length
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        assert self.index is not None and self.time_index is not None
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index_entry > self.config.index_interval_bytes and not self.index.is_full:
            self.index.append(header.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    def _track(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    def finalize_time_index(self) -> None:
        """Make the last time-index entry hold the segment's max timestamp (on roll and close)."""
        if self.time_index is not None and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, force=True)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns the bytes removed."""
        assert self.index is not None and self.time_index is not None
        header = self.find_batch(offset)
        if header is None:
            return 0
        cut = header.position
        removed = self.size - cut
        self._unmap()
        os.ftruncate(self.file.fileno(), cut)
        self.size = cut
        self.index.truncate_to_position(cut)
        self.time_index.truncate_to_offset(header.base_offset)
        if self.txn_index is not None:
            self.txn_index.truncate_to(header.base_offset)
        self.load()
        return removed

    def flush(self) -> None:
        os.fsync(self.file.fileno())
        if self.index is not None:
            self.index.flush()
        if self.time_index is not None:
            self.time_index.flush()
        if self.txn_index is not None:
            self.txn_index.flush()

    # -- reading ------------------------------------------------------------

    def _map(self) -> mmap.mmap | bytes:
        if self.size == 0:
            return b""
        if self._mm is None or self._mm_size != self.size:
            self._unmap()
            self._mm = mmap.mmap(self.file.fileno(), self.size, access=mmap.ACCESS_READ)
            self._mm_size = self.size
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._mm_size = 0

    def header_at(self, position: int) -> BatchHeader:
        """The header of the batch at `position` (length and magic checked, not the CRC).

        Raises CorruptRecord for anything that does not parse as a batch there.
        """
        try:
            return parse_header(self._map(), position)
        except InvalidRecord as exc:
            raise CorruptRecord(f"{self.log_path.name}: {exc}") from None
        except CorruptRecord as exc:
            raise CorruptRecord(f"{self.log_path.name}: {exc}") from None

    def iter_headers(self, start_position: int = 0, *, verify: bool = False) -> Iterator[BatchHeader]:
        """Headers of the batches from `start_position` to the end (CRC-checked if `verify`)."""
        position = start_position
        while position < self.size:
            header = self.header_at(position)
            if verify:
                try:
                    verify_crc(self._map(), header)
                except CorruptRecord as exc:
                    raise CorruptRecord(f"{self.log_path.name}: {exc}") from None
            yield header
            position += header.size

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= `offset`, or None."""
        assert self.index is not None
        _, position = self.index.lookup(offset)
        for header in self.iter_headers(position):
            if header.last_offset >= offset:
                return header
        return None

    def _prefix_at(self, position: int) -> tuple[int, int, int, int, int, int, int]:
        """The fixed prefix of the batch header at `position`, checked for length and magic.

        Bytes below the current mapping come from it (they never change: the log is
        append-only and truncation unmaps). A follower or a tailing consumer reads the
        batches appended since its last fetch: those few headers are read with a small
        pread each, instead of remapping the whole segment on every fetch.
        """
        if (self._mm is None or position + HEADER_SIZE > self._mm_size) and self.size - position > TAIL_PREAD_BYTES:
            self._map()
        if self._mm is not None and position + HEADER_SIZE <= self._mm_size:
            fields = _READ_PREFIX.unpack_from(self._mm, position)
        else:
            data = os.pread(self.file.fileno(), _READ_PREFIX.size, position)
            if len(data) < _READ_PREFIX.size or self.size - position < HEADER_SIZE:
                self.header_at(position)  # raises CorruptRecord
            fields = _READ_PREFIX.unpack(data)
        batch_length, magic = fields[1], fields[3]
        if magic != MAGIC_V2 or batch_length < HEADER_SIZE - LOG_OVERHEAD or position + batch_length + LOG_OVERHEAD > self.size:
            self.header_at(position)  # raises the precise error
            raise CorruptRecord(f"{self.log_path.name}: damaged batch header at position {position}")
        return fields

    def read(self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> SegmentRead | None:
        """Whole batches from the one holding `offset`, up to `max_bytes` (at least one if `min_one`),
        stopping before any batch starting at or beyond `max_offset`. None if no batch here qualifies."""
        assert self.index is not None
        size = self.size
        # The hot path: walk the batches with one small unpack each (offset, length, magic,
        # lastOffsetDelta) instead of building a BatchHeader per batch; any batch that fails
        # the length/magic check goes through header_at for a precise error.
        position = self.index.lookup(offset)[1]
        while True:  # find the batch holding `offset` (the index entry is at or before it)
            if position >= size:
                return None
            base, batch_length, _epoch, _magic, _crc, _attrs, last_delta = self._prefix_at(position)
            if base + last_delta >= offset:
                break
            position += batch_length + LOG_OVERHEAD
        first_position, first_base = position, base
        length = 0
        next_offset = first_base
        stopped = False
        while position < size:
            base, batch_length, _epoch, _magic, _crc, _attrs, last_delta = self._prefix_at(position)
            batch_size = batch_length + LOG_OVERHEAD
            if max_offset is not None and base >= max_offset:
                stopped = True
                break
            if length + batch_size > max_bytes and not (min_one and length == 0):
                stopped = True
                break
            length += batch_size
            position += batch_size
            next_offset = base + last_delta + 1
            if length >= max_bytes:
                stopped = position < size
                break
        if length == 0:
            return SegmentRead(first_position, 0, first_base, first_base, True)
        return SegmentRead(first_position, length, first_base, next_offset, stopped)

    def find_by_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose maxTimestamp is >= `timestamp`, or None."""
        assert self.index is not None and self.time_index is not None
        ts, ts_offset = self.time_index.lookup(timestamp)
        position = 0 if ts < 0 else self.index.lookup(ts_offset)[1]
        for header in self.iter_headers(position):
            if header.max_timestamp >= timestamp:
                return header
        return None

    def read_bytes(self, position: int = 0, length: int | None = None) -> bytes:
        if length is None:
            length = self.size - position
        return os.pread(self.file.fileno(), length, position) if length > 0 else b""

    def largest_timestamp(self) -> int:
        """Max timestamp for retention; the file's mtime if the batches carry none (Kafka's rule)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.file.fileno()).st_mtime * 1000)

    # -- lifecycle ------------------------------------------------------------

    def paths(self) -> list[Path]:
        paths = [self.log_path]
        if self.index is not None:
            paths.append(self.index.path)
        if self.time_index is not None:
            paths.append(self.time_index.path)
        if self.txn_index is not None:
            paths.append(self.txn_index.path)
        return paths

    def rename_with_suffix(self, suffix: str) -> None:
        """Append `suffix` (e.g. `.deleted`) to every file name; open handles stay valid."""
        new_log = self.log_path.with_name(self.log_path.name + suffix)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.index, self.time_index, self.txn_index):
            if index is not None:
                index.rename(index.path.with_name(index.path.name + suffix))

    def _close_indexes(self) -> None:
        for index in (self.index, self.time_index, self.txn_index):
            if index is not None:
                index.close()

    def close(self) -> None:
        self._unmap()
        self._close_indexes()
        self.file.close()

    def close_and_delete(self) -> None:
        paths = self.paths()
        self.close()
        for path in paths:
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
