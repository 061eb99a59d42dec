"""The runner of etcd-raft-style scenario files (`testdata/<core>/*.txt`).

A file is a sequence of blocks: comment/blank lines, a command line, `----`, the
expected output, a blank line. `check_scenario` runs each command through `run` and
compares its output with the expected block; with RAFTKA_TESTDATA_REWRITE=1 it
rewrites the file from the code's output instead (review the diff).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

REWRITE = os.environ.get("RAFTKA_TESTDATA_REWRITE") == "1"


def check_scenario(path: Path, run: Callable[[str], str], parse) -> None:
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
            failures.append(f"{path.name}:{block.line}: {block.command}\n--- expected\n{block.expected}\n"
                            f"--- got\n{got}")
    if REWRITE:
        path.write_text("\n".join(rewritten).rstrip("\n") + "\n")
        return
    assert not failures, "\n\n".join(failures)
