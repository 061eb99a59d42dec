"""partition.metadata and stray partition directories (log/partition_metadata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.log.partition_metadata import (
    FILE_NAME,
    parse_partition_dir,
    read_topic_id,
    stray_partition_dirs,
    write_topic_id,
)


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
])
def test_partition_dir_names(name, parsed):
    assert parse_partition_dir(name) == parsed


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
