"""The consumer-group snippets of docs/using-clients.md (moved there from the README) run as
shown (only the address is changed), against a real one-node server, in a fresh Python process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.sdk_broker import REPO, one_node_server, raftka_env

DOC = REPO / "docs" / "using-clients.md"


def _snippet(heading: str) -> str:
    text = DOC.read_text()
    section = text[text.index(heading):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, f"no python block after {heading!r}"
    return match.group(1)


def _run_as_shown(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a documented block in a fresh Python against a one-node server (only the address changed)."""
    with one_node_server(tmp_path, num_partitions=3) as bootstrap:
        ran = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:9092", bootstrap)],
                             capture_output=True, text=True, env=raftka_env(), cwd=tmp_path,
                             timeout=180)
    assert ran.returncode == 0, ran.stderr
    return ran


def test_the_consumer_group_snippet_runs_as_shown(tmp_path: Path) -> None:
    code = _snippet("\n## Consumer groups\n")
    assert "trio.run(main)" in code
    ran = _run_as_shown(code, tmp_path)
    # on_partitions_assigned=print shows the three partitions of the topic the snippet created.
    assert "orders" in ran.stdout and "partition=2" in ran.stdout, ran.stdout


def test_the_kip848_snippet_runs_as_shown(tmp_path: Path) -> None:
    code = _snippet("\n### Consumer groups: `group.protocol=consumer`")
    assert '"group.protocol": "consumer"' in code
    ran = _run_as_shown(code, tmp_path)
    assert "consumed 10" in ran.stdout, ran.stdout


def test_the_sdk_kip848_snippet_runs_as_shown(tmp_path: Path) -> None:
    code = _snippet("\n### The SDK with `group_protocol=\"consumer\"`")
    assert 'group_protocol="consumer"' in code
    ran = _run_as_shown(code, tmp_path)
    assert "consumed 10 at member epoch" in ran.stdout, ran.stdout
