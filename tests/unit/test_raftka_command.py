"""`cluster up`'s hints name raftka the way the user can run it again (raftka/cli/cluster.py)."""

from __future__ import annotations

import os

import pytest

from raftka.cli.cluster import raftka_command


def test_on_path_it_is_just_raftka(tmp_path, monkeypatch) -> None:
    script = tmp_path / "raftka"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert raftka_command(str(script), "/usr/bin/python3") == "raftka"


@pytest.mark.parametrize(("argv0", "expected"), [
    (".venv/bin/raftka", ".venv/bin/raftka"),                      # make run: not on PATH
    ("/opt/my dir/bin/raftka", "'/opt/my dir/bin/raftka'"),
    ("/src/raftka/__main__.py", "/usr/bin/python3 -m raftka"),      # python -m raftka
    ("-c", "/usr/bin/python3 -m raftka"),
])
def test_otherwise_the_path_or_python_m(argv0: str, expected: str, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert raftka_command(argv0, "/usr/bin/python3") == expected
