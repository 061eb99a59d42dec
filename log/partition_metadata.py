"""`partition.metadata`: which topic incarnation a partition directory belongs to.

Kafka writes this file into every partition directory (`version: 0`,
`topic_id: <id>`). A topic deleted and re-created under the same name while a
broker was down leaves that broker a directory with the right name and the
wrong data; the topic id tells them apart. `stray_partition_dirs` lists the
directories a broker must not serve from: not assigned to it by the metadata
image, or holding another incarnation of the topic (log/strays.py moves them
aside).

Directory names, as Kafka's `UnifiedLog` spells them: `<topic>-<partition>` is a
partition; `<topic>-<partition>.<32 hex>-delete` one renamed for deletion (a
deleted topic, removed later), `...-stray` one renamed aside and kept for an
operator. The metadata log's directory (`__cluster_metadata-0`, in the first
log dir by default) is never a partition; neither is a log dir or the metadata
dir itself, wherever the operator put them (`protected_dirs`).

Plain file-system code, no clocks; callers run it off the event loop.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from raftka.log.atomic_file import atomic_write

FILE_NAME = "partition.metadata"
VERSION = 0
# Kafka's name for the metadata log's directory. It lives in the first log dir by default
# (metadata.log.dir unset) and is never a partition: a stray scan that took it for one
# deleted the cluster's metadata (issue #27). Kafka's LogManager skips every directory of
# the `__cluster_metadata` topic, whatever its partition number; so do we.
METADATA_TOPIC = "__cluster_metadata"
METADATA_LOG_DIR_NAME = f"{METADATA_TOPIC}-0"
DELETE_SUFFIX = "-delete"  # Kafka's UnifiedLog.DeleteDirSuffix
STRAY_SUFFIX = "-stray"  # Kafka's UnifiedLog.StrayDirSuffix
NAME_MAX = 255  # bytes in one file name (Linux, macOS)
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)$")
# `<topic>-<partition>.<uuid without dashes>-delete|-stray` (Kafka's logDirNameWithSuffix).
_RENAMED_DIR = re.compile(r"^(?P<topic>.+)-(?P<index>\d+)\.[0-9a-f]{32}(?P<suffix>-delete|-stray)$")


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in `directory`, None if the file is missing or unreadable
    (a directory written before raftka recorded ids, or a torn write)."""
    try:
        text = (Path(directory) / FILE_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("version", "").strip() != str(VERSION):
        return None
    topic_id = fields.get("topic_id", "").strip()
    return topic_id or None


def write_topic_id(directory: Path, topic_id: str) -> None:
    """Record `topic_id` in `directory` (tmp file + rename: never a half-written file)."""
    atomic_write(Path(directory) / FILE_NAME, f"version: {VERSION}\ntopic_id: {topic_id}\n".encode(),
                 durable=False)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything that is not a partition directory
    (the metadata log's `__cluster_metadata-0` included)."""
    match = _PARTITION_DIR.match(name)
    if match is None or match.group("topic") == METADATA_TOPIC:
        return None
    return match.group("topic"), int(match.group("index"))


def parse_renamed_dir(name: str) -> tuple[str, int, str] | None:
    """`orders-3.<32 hex>-stray` -> ("orders", 3, "-stray") (or "-delete"); None for any other name."""
    match = _RENAMED_DIR.match(name)
    if match is None or match.group("topic") == METADATA_TOPIC:
        return None
    return match.group("topic"), int(match.group("index")), match.group("suffix")


def renamed_dir(directory: Path, suffix: str) -> Path:
    """Kafka's name for `directory` renamed with `suffix`: `<name>.<uuid hex>-delete|-stray`,
    the topic part cut short to keep the name within 255 bytes, as Kafka's
    `logDirNameWithSuffixCappedLength` does (a 249-character topic name is legal: the rename
    would fail with ENAMETOOLONG)."""
    parsed = parse_partition_dir(directory.name)
    topic, index = parsed if parsed is not None else (directory.name, None)
    tail = f".{uuid.uuid4().hex}{suffix}" if index is None else f"-{index}.{uuid.uuid4().hex}{suffix}"
    prefix = topic.encode()[:max(0, NAME_MAX - len(tail.encode()))].decode(errors="ignore")
    return directory.with_name(prefix + tail)


def protected_dirs(log_dirs: Iterable[str | os.PathLike[str]], metadata_log_dir: str | os.PathLike[str] | None
                   ) -> frozenset[Path]:
    """The directories no scan of the log dirs may ever take for a partition (nor rename or
    remove): every log dir, the metadata dir and its `__cluster_metadata-0`. A directory that
    contains one of them is kept too (`is_protected`): metadata.log.dir may be any path,
    `/data/kafka/meta-0` under log.dirs=/data/kafka included."""
    paths = [Path(d) for d in log_dirs]
    if metadata_log_dir:
        paths += [Path(metadata_log_dir), Path(metadata_log_dir) / METADATA_LOG_DIR_NAME]
    return frozenset(p.resolve() for p in paths)


def is_protected(directory: Path, protected: frozenset[Path]) -> bool:
    """`directory` is, or contains, one of `protected` (see `protected_dirs`)."""
    resolved = directory.resolve()
    return any(p == resolved or resolved in p.parents for p in protected)


def stray_partition_dirs(log_dirs: Iterable[Path], expected: Mapping[tuple[str, int], str],
                         protected: frozenset[Path] = frozenset()) -> list[tuple[Path, str]]:
    """(directory, why) for every partition directory under `log_dirs` that is not one of
    `expected` ((topic, partition) -> topic id of the partitions assigned to this broker),
    or whose recorded topic id is another one. A directory without a recorded id is kept, and
    so is every directory `is_protected` by `protected` (see `protected_dirs`)."""
    strays = []
    for directory in log_dir_children(log_dirs, protected):
        key = parse_partition_dir(directory.name)
        if key is None:
            continue
        wanted = expected.get(key)
        if wanted is None:
            strays.append((directory, "not assigned to this broker by the metadata image"))
            continue
        recorded = read_topic_id(directory)
        if recorded is not None and recorded != wanted:
            strays.append((directory, f"holds topic id {recorded}, the topic's id is now {wanted}"))
    return strays


def log_dir_children(log_dirs: Iterable[Path], protected: frozenset[Path] = frozenset()) -> Iterator[Path]:
    """The directories directly in each log dir (a missing log dir has none), by name, never a
    symlink nor one `is_protected` by `protected`: the one scan every caller that looks for
    partition, `-delete` or `-stray` directories uses."""
    for log_dir in log_dirs:
        try:
            entries = sorted(os.scandir(log_dir), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and not is_protected(Path(entry.path), protected):
                yield Path(entry.path)
