"""Partition-log append/read throughput beside a raw `os.write`/`os.pread` of the same bytes.

1 KiB records in 16 KiB and 1 MiB batches. The batches are encoded before
timing starts (the producer's work, not the log's); appends go through
`PartitionLog.append` exactly as the broker calls it (header, CRC and record
validation, offset rewrite, one write, index updates). No fsync on either
side: Kafka's default relies on replication and flushes on roll.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch

RECORD_SIZE = 1024


@dataclass(frozen=True)
class Row:
    case: str
    batches: int
    mib: float
    log_s: float
    raw_s: float

    @property
    def log_mib_s(self) -> float:
        return self.mib / self.log_s

    @property
    def raw_mib_s(self) -> float:
        return self.mib / self.raw_s

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.log_s


def _make_batches(batch_bytes: int, count: int) -> list[bytes]:
    value = os.urandom(RECORD_SIZE - 16)
    per_batch = max(1, batch_bytes // RECORD_SIZE)
    while True:  # record framing adds a few bytes each: stay within the batch size
        template = [Record(key=f"key-{i:08d}".encode(), value=value) for i in range(per_batch)]
        one = encode_batch(template)
        if len(one) <= batch_bytes or per_batch == 1:
            break
        per_batch -= 1
    return [one] * count  # identical bytes are fine: the log rewrites the offsets


def _raw_write(directory: Path, batches: list[bytes]) -> float:
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for b in batches:
            os.write(fd, b)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()


def _log_append(directory: Path, batches: list[bytes]) -> tuple[float, PartitionLog]:
    log = PartitionLog.open(directory, "bench", 0, LogConfig())
    start = time.perf_counter()
    for b in batches:
        log.append(b, leader_epoch=0)
    return time.perf_counter() - start, log


def _raw_read(path: Path, chunk: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        start = time.perf_counter()
        pos = 0
        while pos < size:
            pos += len(os.pread(fd, chunk, pos))
        return time.perf_counter() - start
    finally:
        os.close(fd)


def _log_read(log: PartitionLog, chunk: int) -> float:
    start = time.perf_counter()
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        info = log.read(offset, chunk)
        info.read_bytes()
        offset = info.next_offset
    return time.perf_counter() - start


def run(total_mib: int = 256, repeats: int = 3) -> list[Row]:
    rows: list[Row] = []
    for label, batch_bytes in (("16 KiB batches", 16 * 1024), ("1 MiB batches", 1024 * 1024)):
        count = total_mib * 1024 * 1024 // batch_bytes
        batches = _make_batches(batch_bytes, count)
        mib = sum(len(b) for b in batches) / (1024 * 1024)
        # Alternate the raw and the log runs and keep each one's best, so neither
        # side alone pays for page-cache warm-up.
        raw_s = log_s = raw_read_s = log_read_s = float("inf")
        for _ in range(repeats):
            with tempfile.TemporaryDirectory(prefix="raftka-bench-") as tmp:
                tmp_path = Path(tmp)
                raw_s = min(raw_s, _raw_write(tmp_path, batches))
                elapsed, log = _log_append(tmp_path, batches)
                log_s = min(log_s, elapsed)
                seg = log.segments[0].log_path
                raw_read_s = min(raw_read_s, _raw_read(seg, batch_bytes))
                log_read_s = min(log_read_s, _log_read(log, batch_bytes))
                log.close()
        rows.append(Row(f"append, {label}", count, mib, log_s, raw_s))
        rows.append(Row(f"read, {label}", count, mib, log_read_s, raw_read_s))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = [
        "| case | MiB | raftka MiB/s | raw os MiB/s | raftka/raw | batches/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.mib:.0f} | {r.log_mib_s:.0f} | {r.raw_mib_s:.0f} | "
            f"{r.log_mib_s / r.raw_mib_s:.0%} | {r.batches_per_s:,.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run()))
