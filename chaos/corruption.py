"""Damage to a stopped node's closed segments, and finding the node's report of it.

The corrupt nemesis (chaos/nemesis.py) stops a node, calls `corrupt_segment` on
its log directory and restarts it. Only closed segments (every `.log` of a
partition but the newest) are touched: the active one may legitimately hold a
torn tail after a kill, so damaging it would prove nothing about CRC checks.

- flip: one bit inside the CRC-covered part of one batch (attributes to the
  end), so only the CRC can tell;
- truncate: the file is cut strictly inside one batch, as a lost write-back
  of a file's tail would leave it.

A node reports either as `log.corrupt_batch` (a segment below its recovery
point failed its CRC check) or `log.recovery.truncated` (the damage lay past
the recovery point, where every batch is re-checked anyway) in its JSON log.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from raftka.log.batch_header import iter_headers

# Bytes of a v2 batch before `attributes`, where the CRC's coverage starts:
# baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4.
CRC_COVERED_FROM = 21
DETECTION_EVENTS = frozenset({"log.corrupt_batch", "log.recovery.truncated"})
KINDS = ("flip", "truncate")


@dataclass(frozen=True)
class Corruption:
    kind: str  # flip | truncate
    partition: int
    segment: str  # the .log file's name
    batch_base_offset: int  # the batch the damage sits in
    position: int  # flip: the byte changed; truncate: the file's new length
    bit: int | None  # flip: which bit of that byte
    original_size: int

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _partition_of(directory: Path, topic: str) -> int | None:
    prefix = topic + "-"
    if not directory.name.startswith(prefix):
        return None
    rest = directory.name[len(prefix):]
    return int(rest) if rest.isdigit() else None


def closed_segments(data_dir: Path, topic: str) -> list[tuple[int, Path]]:
    """(partition, segment) for every non-empty closed segment of `topic` under `data_dir`."""
    out = []
    for part_dir in sorted(Path(data_dir).glob(f"{topic}-*")):
        partition = _partition_of(part_dir, topic)
        if partition is None or not part_dir.is_dir():
            continue
        logs = sorted(part_dir.glob("*.log"))  # names are zero-padded base offsets
        out += [(partition, p) for p in logs[:-1] if p.stat().st_size > 0]
    return out


def corrupt_segment(data_dir: Path, topic: str, kind: str, rng: random.Random) -> Corruption | None:
    """Damage one closed segment of `topic` in a (stopped) node's log dir; None if it has none."""
    if kind not in KINDS:
        raise ValueError(f"corruption kind {kind!r}; expected one of {KINDS}")
    candidates = closed_segments(data_dir, topic)
    if not candidates:
        return None
    partition, path = rng.choice(candidates)
    data = path.read_bytes()
    headers = list(iter_headers(data, verify=False))
    if not headers:
        return None
    batch = rng.choice(headers)
    if kind == "flip":
        position = rng.randrange(batch.position + CRC_COVERED_FROM, batch.position + batch.size)
        bit = rng.randrange(8)
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(bytes([data[position] ^ (1 << bit)]))
            f.flush()
            os.fsync(f.fileno())
        return Corruption(kind, partition, path.name, batch.base_offset, position, bit, len(data))
    position = rng.randrange(batch.position + 1, batch.position + batch.size)
    os.truncate(path, position)
    return Corruption(kind, partition, path.name, batch.base_offset, position, None, len(data))


def detection_in_log(log_path: Path, start: int, topic: str, partition: int) -> dict[str, Any] | None:
    """The first JSON log line at or after byte `start` in which the node reports damage to
    `topic`/`partition`; None if there is none (yet)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        if b"log." not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:  # a line another writer left half-written, or not JSON at all
            continue
        if (isinstance(entry, dict) and entry.get("event") in DETECTION_EVENTS and entry.get("topic") == topic
                and entry.get("partition") == partition):
            return entry
    return None
