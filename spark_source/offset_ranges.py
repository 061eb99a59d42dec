"""Offset arithmetic for planning reads (pure).

A read is a set of half-open ranges [start, end) per topic-partition. Batch
reads split large ranges to honour `minPartitions`; streaming micro-batches
cap the total with `maxOffsetsPerTrigger`. Streaming offsets travel through
Spark as dicts `{"topic": {"0": 12, "1": 7}}`, which Spark compares as JSON
strings: `to_stream_offset` always builds them in one order (topics sorted,
partitions numerically), so equal positions give equal strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_stream_offset(positions: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition) in sorted(positions):
        out.setdefault(topic, {})[str(partition)] = int(positions[(topic, partition)])
    return out


def from_stream_offset(offset: Mapping[str, Mapping[str, int]]) -> dict[TopicPartitionKey, int]:
    """The inverse of `to_stream_offset` (keys come back as strings after a restart)."""
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in offset.items():
        for partition, position in parts.items():
            out[(str(topic), int(partition))] = int(position)
    return out


def plan_ranges(start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int],
                min_partitions: int | None = None) -> list[OffsetRange]:
    """One range per partition present in both maps with end > start, sorted;
    with `min_partitions` larger than the number of ranges, large ranges are
    split (in proportion to their size, rounding up, each into near-equal
    parts) so there are at least `min_partitions`, without loss or overlap."""
    ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)])
              for (t, p) in sorted(start) if (t, p) in end and end[(t, p)] > start[(t, p)]]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, math.ceil(r.size * min_partitions / total)))
        out.extend(split_range(r, parts))
    return out


def split_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` cut into `parts` contiguous near-equal ranges (the first ones one larger)."""
    base, extra = divmod(r.size, parts)
    out: list[OffsetRange] = []
    position = r.start
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        if size:
            out.append(OffsetRange(r.topic, r.partition, position, position + size))
        position += size
    return out


def cap_offsets(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int],
                max_rows: int) -> dict[TopicPartitionKey, int]:
    """End positions reading at most `max_rows` records in total past `start`.

    The budget is shared in proportion to each partition's backlog (as Spark's
    Kafka source does), rounding down; what rounding leaves goes one record at
    a time to the partitions with backlog left, in sorted order. Unlike Spark
    (which rounds small shares up) the total never exceeds `max_rows`, and it
    is always min(max_rows, total backlog), so every trigger makes progress.
    Partitions of `latest` missing from `start` start at 0 here: callers put
    new partitions into `start` first.
    """
    if max_rows <= 0:
        raise ValueError(f"max_rows must be positive, got {max_rows}")
    lag = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in sorted(latest)}
    total = sum(lag.values())
    if total <= max_rows:
        return {tp: max(latest[tp], start.get(tp, 0)) for tp in latest}
    grant = {tp: (max_rows * n) // total for tp, n in lag.items()}
    left = max_rows - sum(grant.values())
    while left > 0:
        for tp, n in lag.items():
            if left and grant[tp] < n:
                grant[tp] += 1
                left -= 1
    return {tp: start.get(tp, 0) + grant[tp] for tp in latest}
