"""partition.metadata and stray partition directories (log/partition_metadata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.log.partition_metadata import (
    FILE_NAME,
    parse_partition_dir,
    parse_renamed_dir,
    protected_dirs,
    read_topic_id,
    stray_partition_dirs,
    write_topic_id,
)
from raftka.log.strays import REASON_FILE, find_strays, move_strays_aside, remove_stray

HEX = "0123456789abcdef" * 2


@pytest.mark.parametrize(("name", "parsed"), [
    ("orders-0", ("orders", 0)),
    ("my-topic-12", ("my-topic", 12)),
    ("a.b_c-3", ("a.b_c", 3)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("orders", None),
    ("orders-", None),
    ("orders-x", None),
    ("meta.properties", None),
    ("orders-0.abc-delete", None),
    (f"orders-0.{HEX}-delete", None),
    (f"orders-0.{HEX}-stray", None),
    # the metadata log is never a partition, whatever its number (Kafka skips the topic)
    ("__cluster_metadata-0", None),
    ("__cluster_metadata-1", None),
    ("x__cluster_metadata-0", ("x__cluster_metadata", 0)),
])
def test_partition_dir_names(name, parsed):
    assert parse_partition_dir(name) == parsed


@pytest.mark.parametrize(("name", "parsed"), [
    (f"orders-0.{HEX}-delete", ("orders", 0, "-delete")),
    (f"my-topic-12.{HEX}-stray", ("my-topic", 12, "-stray")),
    ("orders-0.abc-delete", None),           # not Kafka's 32-hex-digit id
    (f"orders-0.{HEX.upper()}-stray", None),
    ("x-delete", None),
    ("orders-0-delete", None),
    (f"orders.{HEX}-delete", None),         # no partition number
    (f"orders-0.{HEX}-future", None),       # Kafka's future replicas: raftka has none
    (f"__cluster_metadata-0.{HEX}-delete", None),
    ("orders-0", None),
])
def test_renamed_dir_names(name, parsed):
    assert parse_renamed_dir(name) == parsed


@pytest.mark.parametrize(("content", "topic_id"), [
    ("version: 0\ntopic_id: abc\n", "abc"),
    ("version: 0\ntopic_id:  abc  \n", "abc"),
    ("version: 1\ntopic_id: abc\n", None),   # a version we do not know
    ("version: 0\n", None),
    ("", None),                              # a torn write
    ("garbage", None),
])
def test_read_topic_id(tmp_path: Path, content: str, topic_id: str | None):
    (tmp_path / FILE_NAME).write_text(content)
    assert read_topic_id(tmp_path) == topic_id


def test_write_then_read(tmp_path: Path):
    assert read_topic_id(tmp_path) is None
    write_topic_id(tmp_path, "t-1")
    assert read_topic_id(tmp_path) == "t-1"
    assert (tmp_path / FILE_NAME).read_text() == "version: 0\ntopic_id: t-1\n"
    assert not list(tmp_path.glob("*.tmp"))


def _dirs(root: Path, layout: dict[str, str | None]) -> None:
    for name, topic_id in layout.items():
        (root / name).mkdir(parents=True)
        if topic_id is not None:
            write_topic_id(root / name, topic_id)


@pytest.mark.parametrize(("on_disk", "expected", "strays"), [
    # assigned, same id / no recorded id (older data): kept
    ({"a-0": "id-a", "b-0": None}, {("a", 0): "id-a", ("b", 0): "id-b"}, []),
    # not assigned by the image: stray
    ({"a-0": "id-a", "gone-0": "id-g"}, {("a", 0): "id-a"}, ["gone-0"]),
    ({"a-1": None}, {("a", 0): "id-a"}, ["a-1"]),
    # an earlier incarnation of a re-created topic: stray
    ({"a-0": "old-id"}, {("a", 0): "new-id"}, ["a-0"]),
    # not partition directories: never touched
    ({"not-a-partition": None, "x-0.abc-delete": None}, {}, []),
    # the metadata log in the first log dir (Kafka's default layout) is never a partition (#27)
    ({"__cluster_metadata-0": None, "gone-0": None}, {}, ["gone-0"]),
])
def test_strays(tmp_path: Path, on_disk, expected, strays):
    _dirs(tmp_path, on_disk)
    (tmp_path / "meta.properties").write_text("x")
    found = stray_partition_dirs([tmp_path, tmp_path / "missing-log-dir"], expected)
    assert [d.name for d, _why in found] == strays


# The wrong guess: a directory named like a partition that is the metadata dir, holds it, or
# is a log dir itself. metadata.log.dir may be any path (#27: "wherever it lives").
@pytest.mark.parametrize(("log_dirs", "metadata_dir", "on_disk", "strays"), [
    # Kafka's default: the metadata log in the first of several log dirs
    (["a", "b"], "a", {"a/__cluster_metadata-0": None, "b/gone-0": None}, ["b/gone-0"]),
    # metadata.log.dir is the second log dir
    (["a", "b"], "b", {"b/__cluster_metadata-0": None, "a/gone-1": None}, ["a/gone-1"]),
    # metadata.log.dir is a partition-like directory inside a log dir
    (["a"], "a/meta-0", {"a/meta-0/__cluster_metadata-0": None, "a/gone-0": None}, ["a/gone-0"]),
    # ... or below one
    (["a"], "a/kraft-1/meta", {"a/kraft-1/meta/__cluster_metadata-0": None}, []),
    # a log dir nested in another log dir, named like a partition
    (["a", "a/disk-2"], "m", {"a/disk-2/gone-0": None, "a/gone-3": None}, ["a/disk-2/gone-0", "a/gone-3"]),
    # a metadata dir elsewhere leaves the log dirs' strays as they are
    (["a"], "m", {"a/__cluster_metadata-0": None, "a/gone-0": None}, ["a/gone-0"]),
])
def test_protected_dirs_are_never_strays(tmp_path: Path, log_dirs, metadata_dir, on_disk, strays):
    _dirs(tmp_path, on_disk)
    dirs = [tmp_path / d for d in log_dirs]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    protected = protected_dirs(dirs, tmp_path / metadata_dir)
    found = stray_partition_dirs(dirs, {}, protected)
    assert sorted(str(d.relative_to(tmp_path)) for d, _ in found) == sorted(strays)
    moved = move_strays_aside(dirs, {}, protected, now_ms=1_000)
    assert sorted(str(old.relative_to(tmp_path)) for old, _ in moved) == sorted(strays)
    for name in on_disk:
        if name not in strays:
            assert (tmp_path / name).is_dir(), name


def test_a_stray_is_renamed_aside_kept_listed_and_removed(tmp_path: Path):
    _dirs(tmp_path, {"keep-0": "id-k", "gone-0": "id-g", "again-0": "old-id"})
    (tmp_path / "gone-0" / "00000000000000000000.log").write_bytes(b"x" * 100)
    expected = {("keep", 0): "id-k", ("again", 0): "new-id"}
    moved = dict(move_strays_aside([tmp_path], expected, protected_dirs([tmp_path], tmp_path), now_ms=1_234))
    assert sorted(old.name for old in moved) == ["again-0", "gone-0"]
    gone = moved[tmp_path / "gone-0"]
    assert parse_renamed_dir(gone.name) == ("gone", 0, "-stray")
    assert (gone / "00000000000000000000.log").read_bytes() == b"x" * 100  # kept, byte for byte
    assert "renamed_at_ms: 1234" in (gone / REASON_FILE).read_text()
    assert (tmp_path / "keep-0").is_dir()
    # Set aside, a stray is no partition: a second scan leaves it alone.
    assert stray_partition_dirs([tmp_path], expected) == []
    # A stray segment file inside a live partition directory is listed too.
    (tmp_path / "keep-0" / "00000000000000000042.log.abcd1234.stray").write_bytes(b"y" * 7)
    found = find_strays([tmp_path])
    assert [(s.path.name, s.kind) for s in found] == [
        (moved[tmp_path / "again-0"].name, "partition"), (gone.name, "partition"),
        ("00000000000000000042.log.abcd1234.stray", "segment")]
    by_path = {s.path: s for s in found}
    assert by_path[gone].size_bytes == 100 + len("version: 0\ntopic_id: id-g\n") + len(
        (gone / REASON_FILE).read_bytes())
    assert by_path[gone].renamed_at_ms == 1234
    assert by_path[gone].reason == "not assigned to this broker by the metadata image"
    assert "topic id old-id" in by_path[moved[tmp_path / "again-0"]].reason
    for stray in found:
        remove_stray(stray)
    assert find_strays([tmp_path]) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep-0"]
    assert (tmp_path / "keep-0" / FILE_NAME).exists()
