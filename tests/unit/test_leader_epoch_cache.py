"""Leader epoch cache: Kafka's assign / endOffsetFor / truncation semantics and the file format."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.log.checkpoint import CorruptCheckpoint
from raftka.log.leader_epoch_cache import LeaderEpochCache

LEO = 100


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in [(2, 10), (4, 30), (7, 60)]:
        c.assign(epoch, start)
    return c


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (7, (7, LEO)),  # the latest epoch ends at the log end
        (4, (4, 60)),  # ends where the next epoch starts
        (5, (4, 60)),  # unknown epoch in between: the largest epoch below it
        (6, (4, 60)),
        (2, (2, 30)),
        (3, (2, 30)),
        (1, (1, 10)),  # below the first: Kafka answers (requested, first start offset)
        (0, (0, 10)),
        (8, (-1, -1)),  # above the latest: UNDEFINED
        (-1, (-1, -1)),  # UNDEFINED requested
    ],
)
def test_end_offset_for_epoch(cache: LeaderEpochCache, requested: int, expected: tuple[int, int]) -> None:
    assert cache.end_offset_for_epoch(requested, LEO) == expected


def test_empty_cache_is_undefined(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path / "x")
    assert c.latest_epoch == -1
    assert c.end_offset_for_epoch(0, 5) == (-1, -1)


@pytest.mark.parametrize(
    ("epoch", "start", "changed", "after"),
    [
        (7, 80, False, [(2, 10), (4, 30), (7, 60)]),  # same epoch, later offset: no-op
        (7, 50, True, [(2, 10), (4, 30), (7, 50)]),  # same epoch, earlier offset: moved
        (8, 90, True, [(2, 10), (4, 30), (7, 60), (8, 90)]),  # newer epoch appended
        (8, 60, True, [(2, 10), (4, 30), (8, 60)]),  # start collides: older entry removed
        (5, 40, True, [(2, 10), (4, 30), (5, 40)]),  # older epoch: later entries removed
        (3, 5, True, [(3, 5)]),  # everything conflicts
    ],
)
def test_assign(cache: LeaderEpochCache, epoch: int, start: int, changed: bool, after: list) -> None:
    assert cache.assign(epoch, start) is changed
    assert cache.entries() == after
    assert LeaderEpochCache(cache.path).entries() == after


def test_assign_rejects_negative(cache: LeaderEpochCache) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        cache.assign(-1, 5)


@pytest.mark.parametrize(
    ("end", "after"),
    [(100, [(2, 10), (4, 30), (7, 60)]), (61, [(2, 10), (4, 30), (7, 60)]), (60, [(2, 10), (4, 30)]), (11, [(2, 10)]), (10, []), (0, [])],
)
def test_truncate_from_end(cache: LeaderEpochCache, end: int, after: list) -> None:
    cache.truncate_from_end(end)
    assert cache.entries() == after
    assert LeaderEpochCache(cache.path).entries() == after


@pytest.mark.parametrize(
    ("start", "after"),
    [
        (5, [(2, 10), (4, 30), (7, 60)]),
        (10, [(2, 10), (4, 30), (7, 60)]),
        (20, [(2, 20), (4, 30), (7, 60)]),
        (30, [(4, 30), (7, 60)]),
        (75, [(7, 75)]),
    ],
)
def test_truncate_from_start(cache: LeaderEpochCache, start: int, after: list) -> None:
    cache.truncate_from_start(start)
    assert cache.entries() == after
    assert LeaderEpochCache(cache.path).entries() == after


def test_file_format_is_kafkas(cache: LeaderEpochCache) -> None:
    assert cache.path.read_text() == "0\n3\n2 10\n4 30\n7 60\n"
    cache.clear()
    assert cache.path.read_text() == "0\n0\n"
    assert not cache.path.with_name(cache.path.name + ".tmp").exists()


@pytest.mark.parametrize(
    "text", ["1\n0\n", "0\n2\n1 5\n", "0\n1\n1 5 7\n", "0\n2\n3 5\n2 9\n", "0\nx\n", "0\n1\na b\n"]
)
def test_corrupt_file_is_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        LeaderEpochCache(path)
