"""The leader's record validation alone (`log.record_validator.validate_records`).

~1 MiB batches of ~1 KiB text records, uncompressed, zstd and lz4. "uniform": 1 KiB
values, no key, no headers (what a producer of fixed-size messages sends: the strided
fast path); "varied": 900-1100 B values and a key on every other record (the
record-by-record walk). The rate counts the records' uncompressed value bytes;
decompression is included. Best of several timed loops.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from raftka.log.batch_header import parse_header
from raftka.log.compression import Compression
from raftka.log.record_batch import Record, encode_batch
from raftka.log.record_validator import validate_records

RECORDS = 1024


@dataclass(frozen=True)
class Row:
    case: str
    batch_bytes: int
    ms_per_batch: float
    mb_s: float


def _text(rng: random.Random, words: list[bytes], size: int) -> bytes:
    return b" ".join(rng.choice(words) for _ in range(size // 3))[:size].ljust(size, b".")


def run(repeats: int = 3, seconds: float = 0.3) -> list[Row]:
    rng = random.Random(1)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    shapes = {
        "uniform": [Record(None, _text(rng, words, 1024)) for _ in range(RECORDS)],
        "varied": [Record(b"key-%d" % i if i % 2 else None, _text(rng, words, rng.randint(900, 1100)))
                   for i in range(RECORDS)],
    }
    rows = []
    for shape, records in shapes.items():
        value_bytes = sum(len(r.value) for r in records)
        for codec in (Compression.NONE, Compression.ZSTD, Compression.LZ4):
            batch = memoryview(encode_batch(records, compression=codec))
            header = parse_header(batch)
            best = float("inf")
            for _ in range(repeats):
                n = 0
                start = time.perf_counter()
                while time.perf_counter() - start < seconds:
                    validate_records(batch, header, max_uncompressed=32 << 20)
                    n += 1
                best = min(best, (time.perf_counter() - start) / n)
            rows.append(Row(f"{shape}, {codec.name.lower()}", len(batch), best * 1000, value_bytes / best / 1e6))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = ["| records, codec | batch bytes | ms per batch | MB/s of records |", "|---|---|---|---|"]
    lines += [f"| {r.case} | {r.batch_bytes:,} | {r.ms_per_batch:.2f} | {r.mb_s:,.0f} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run()))
