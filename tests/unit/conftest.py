"""Fixtures for the log-layer tests: batch builders and partition logs in tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch

TOPIC = "t"
PARTITION = 0


def make_batch(
    values: list[bytes] | int = 1,
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value_size: int = 10,
) -> bytes:
    """One uncompressed batch; `values` is a list or a record count (values of `value_size` bytes)."""
    if isinstance(values, int):
        values = [bytes([65 + i % 26]) * value_size for i in range(values)]
    keys = keys if keys is not None else [None] * len(values)
    records = [Record(key=k, value=v, timestamp=timestamp) for k, v in zip(keys, values, strict=True)]
    return encode_batch(
        records,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_timestamp=timestamp,
    )


def crash(log: PartitionLog) -> None:
    """Simulate process death: close the file handles without flushing or writing anything."""
    for segment in log.segments:
        segment.close()
    for _, segment in log._pending_deletes:
        segment.close()
    log._closed = True


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[Callable[..., PartitionLog]]:
    """Factory: open_log(now_ms=..., **config fields) -> PartitionLog in tmp_path; closed at teardown."""
    opened: list[PartitionLog] = []

    def factory(*, now_ms: int | None = 0, config: LogConfig | None = None, verify_flushed: bool = True,
                **fields: object) -> PartitionLog:
        log = PartitionLog.open(tmp_path, TOPIC, PARTITION, config or LogConfig(**fields), now_ms=now_ms,
                                verify_flushed=verify_flushed)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        if not log._closed:
            crash(log)


@pytest.fixture
def part_dir(tmp_path: Path) -> Path:
    return tmp_path / f"{TOPIC}-{PARTITION}"
