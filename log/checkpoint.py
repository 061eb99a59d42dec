"""Kafka's small text checkpoint files, written atomically.

Format (Kafka's CheckpointFile): a version line, a count line, then one entry
per line with space-separated fields:

    0
    2
    3 100
    5 250

Writes go through `atomic_file.atomic_write` (`<name>.tmp`, fsynced, renamed over the old
file, directory fsynced), so a crash leaves either the old or the new file whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from raftka.log.atomic_file import atomic_write, fsync_dir

__all__ = ["CorruptCheckpoint", "fsync_dir", "read_checkpoint", "read_offsets", "write_checkpoint",
           "write_offsets"]

CHECKPOINT_VERSION = 0


class CorruptCheckpoint(ValueError):
    """A checkpoint file does not parse; the message names the file, the line and what was expected."""


def write_checkpoint(path: Path, entries: Sequence[Sequence[object]], version: int = CHECKPOINT_VERSION) -> None:
    """Atomically replace `path` with `entries` (each a sequence of fields)."""
    path = Path(path)
    lines = [str(version), str(len(entries))]
    lines.extend(" ".join(str(field) for field in entry) for entry in entries)
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path, fields: int, version: int = CHECKPOINT_VERSION) -> list[list[str]] | None:
    """The entries of `path` (each a list of `fields` strings), or None if the file is missing.

    Raises CorruptCheckpoint for a wrong version, a count that does not match
    the entries, or an entry with the wrong number of fields.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpoint(f"{path}: {len(lines)} lines, expected at least a version and a count line")
    if lines[0].strip() != str(version):
        raise CorruptCheckpoint(f"{path}: version {lines[0]!r}, expected {version}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"{path}: count line {lines[1]!r} is not an integer") from None
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CorruptCheckpoint(f"{path}: {len(body)} entries, the count line says {count}")
    entries = []
    for number, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CorruptCheckpoint(f"{path} line {number}: {line!r} has {len(parts)} fields, expected {fields}")
        entries.append(parts)
    return entries


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Kafka's `recovery-point-offset-checkpoint` / `log-start-offset-checkpoint` layout."""
    write_checkpoint(path, [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())])


def read_offsets(path: Path) -> dict[tuple[str, int], int] | None:
    """Inverse of `write_offsets`; None if the file is missing. Raises CorruptCheckpoint."""
    entries = read_checkpoint(path, 3)
    if entries is None:
        return None
    result = {}
    for topic, partition, offset in entries:
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CorruptCheckpoint(f"{path}: entry {topic} {partition} {offset} has a non-integer field") from None
    return result

