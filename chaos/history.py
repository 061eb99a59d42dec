"""The history of a chaos run: plain data, one JSON object per line.

Jepsen's shape: every client operation is an `invoke` followed by exactly one
completion (`ok`, `fail` = definitely did not happen, `info` = unknown), all
with the same `process`. Nemesis events are `info` ops of process "nemesis".

Fields
    process   int for clients (a client whose op ended in `info` is retired and
              continues under a new process id), "nemesis" for faults
    type      invoke | ok | fail | info
    f         send | poll | assign | revoke | drain | nemesis verbs (kill, corrupt, ...)
    value     send: the unique int sent; poll: list of [partition, offset, value];
              assign: the partitions newly assigned to the consumer, either a list
              (assign mode: the consumer restarted its positions) or, in group mode,
              {"partitions": [...], "epoch": e, "generation": g}
    partition, offset   where a send went (offset known only on ok)
    time      seconds since the run started (monotonic clock)
    wall      Unix time, for humans
    error     why a send failed or is unknown
    epoch     group mode: the consumer's assignment epoch (a counter of the assignments
              it received) when a poll returned; an assign op carries the epoch it starts
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

OP_TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"


@dataclass(frozen=True)
class Op:
    process: int | str
    type: str
    f: str
    value: Any = None
    partition: int | None = None
    offset: int | None = None
    time: float = 0.0
    wall: float = 0.0
    error: str | None = None
    epoch: int | None = None

    def __post_init__(self) -> None:
        if self.type not in OP_TYPES:
            raise ValueError(f"op type {self.type!r}; expected one of {OP_TYPES}")

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, separators=(",", ":"))

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> Op:
        known = {k: raw[k] for k in Op.__dataclass_fields__ if k in raw}
        value = known.get("value")
        if isinstance(value, list) and known.get("f") == "poll":
            known["value"] = [tuple(item) for item in value]
        return Op(**known)


def op(process: int | str, type: str, f: str, value: Any = None, partition: int | None = None,
       offset: int | None = None, time: float = 0.0, error: str | None = None,
       epoch: int | None = None) -> Op:
    """Shorthand for building histories by hand (tests, examples)."""
    return Op(process, type, f, value, partition, offset, time, 0.0, error, epoch)


class HistoryWriter:
    """Appends ops to a JSON-lines file as they happen (a crash keeps what was recorded)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: TextIO = open(self.path, "a")  # noqa: SIM115 - closed by close()
        self.ops: list[Op] = []

    def append(self, operation: Op) -> Op:
        self.ops.append(operation)
        self._file.write(operation.to_json() + "\n")
        return operation

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_history(path: str | Path) -> list[Op]:
    with open(path) as f:
        return [Op.from_dict(json.loads(line)) for line in f if line.strip()]


def write_history(path: str | Path, ops: Iterable[Op]) -> None:
    with open(path, "w") as f:
        for operation in ops:
            f.write(operation.to_json() + "\n")


def nemesis_windows(ops: Iterable[Op]) -> Iterator[tuple[str, float, float | None]]:
    """(fault, start, end) for each fault: a nemesis op with value {"phase": "start"} up to
    the next {"phase": "stop"} op of the same fault id."""
    for _fid, fault, start, end in nemesis_spans(ops):
        yield fault, start, end


def nemesis_spans(ops: Iterable[Op]) -> Iterator[tuple[str, str, float, float | None]]:
    """(fault id, fault, start, end) for each fault, as `nemesis_windows`."""
    open_: dict[str, tuple[str, float]] = {}
    for o in ops:
        if o.process != NEMESIS or not isinstance(o.value, dict):
            continue
        fid = str(o.value.get("id"))
        if o.value.get("phase") == "start":
            open_[fid] = (o.f, o.time)
        elif o.value.get("phase") == "stop" and fid in open_:
            f, start = open_.pop(fid)
            yield fid, f, start, o.time
    for fid, (f, start) in open_.items():
        yield fid, f, start, None
