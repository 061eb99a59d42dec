"""etcd-raft style scenario files (`testdata/<core>/*.txt`), shared by the pure cores' harnesses.

A file is a sequence of blocks (etcd-raft's datadriven format, without its arguments
in parentheses):

    # comments
    command key=value ...
    ----
    expected output
    <blank line>

`check_scenario_file` runs each command through `run(command) -> str` and compares
what it returns with the expected block; a failure lists every block that differs,
as `file:line: command` and a unified diff of expected against got. With
RAFTKA_TESTDATA_REWRITE=1 it rewrites the expectations from the code's output
instead (then review the diff with `git diff`: the code's output is not right by
being the code's).

A harness is a `CommandHarness` whose `cmd_<name>(kv)` methods run the commands;
`scenario_tests(testdata, Harness, minimum)` gives the two tests of a directory.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REWRITE = os.environ.get("RAFTKA_TESTDATA_REWRITE") == "1"


@dataclass
class Block:
    command: str
    expected: str
    line: int


def parse(text: str) -> list[tuple[list[str], Block | None]]:
    """(comment/blank lines before it, block) pairs; a trailing pair may have no block."""
    out: list[tuple[list[str], Block | None]] = []
    lines = text.splitlines()
    i, prefix = 0, []
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            prefix.append(line)
            i += 1
            continue
        start = i
        command = line
        i += 1
        if i >= len(lines) or lines[i] != "----":
            raise ValueError(f"line {i + 1}: expected '----' after command {command!r}")
        i += 1
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        out.append((prefix, Block(command, "\n".join(expected), start + 1)))
        prefix = []
    if prefix:
        out.append((prefix, None))
    return out


def command_args(command: str) -> tuple[str, dict[str, str]]:
    """`name k=v k=v` -> (name, {k: v})."""
    name, *args = command.split()
    return name, dict(a.split("=", 1) for a in args)


class CommandHarness:
    """Runs `name k=v ...` as `self.cmd_<name>({k: v})`, which returns the block's output."""

    def run(self, command: str) -> str:
        name, kv = command_args(command)
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            raise ValueError(f"unknown command {name!r}")
        out = handler(kv)
        return out if out is not None else ""


def scenario_tests(testdata: Path, harness: Callable[[], CommandHarness], minimum: int):
    """The two tests of a scenario directory: it holds at least `minimum` files, and each
    file passes with a fresh harness. Bind them to `test_*` names in the test module."""
    files = sorted(testdata.glob("*.txt"))

    def test_there_are_scenarios() -> None:
        assert len(files) >= minimum, files

    @pytest.mark.parametrize("path", files, ids=[p.stem for p in files])
    def test_scenario(path: Path) -> None:
        check_scenario_file(path, harness().run)

    return test_there_are_scenarios, test_scenario


def check_scenario_file(path: Path, run: Callable[[str], str], *, rewrite: bool = REWRITE) -> None:
    rewritten: list[str] = []
    failures: list[str] = []
    for prefix, block in parse(path.read_text()):
        if not prefix and rewritten:
            rewritten.append("")
        rewritten.extend(prefix)
        if block is None:
            continue
        try:
            got = run(block.command)
        except Exception as exc:  # a broken command is a failure of that block, with its line
            got = f"exception: {type(exc).__name__}: {exc}"
        rewritten += [block.command, "----", got]
        if got != block.expected:
            failures.append(f"{path.name}:{block.line}: {block.command}\n{diff(block.expected, got)}")
    if rewrite:
        path.write_text("\n".join(rewritten).rstrip("\n") + "\n")
        return
    assert not failures, (f"{len(failures)} block(s) of {path} differ (RAFTKA_TESTDATA_REWRITE=1 rewrites "
                          "them from the code's output):\n\n" + "\n\n".join(failures))


def diff(expected: str, got: str) -> str:
    """A unified diff of a block's expected output against what the command printed."""
    lines = difflib.unified_diff(expected.splitlines(), got.splitlines(), "expected", "got", lineterm="", n=2)
    return "\n".join(lines)
