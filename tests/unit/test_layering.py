"""The layering of DESIGN.md, checked on the imports themselves.

The folders install as sub-packages of `raftka` (raftka.log, raftka.client, ...),
so import graphs drawn by folder cannot see `raftka.broker` -> `broker/`; this
test reads every module's imports (including those inside functions) and holds
them against the DAG: log <- client <- broker -> raft_meta; spark_source and
chaos on top of client; nothing imports the top package's own modules (the CLI,
the pytest plugin).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# layer -> the raftka layers it may import (itself included)
ALLOWED = {
    "log": {"log"},
    "client": {"client", "log"},
    "raft_meta": {"raft_meta", "log"},  # DESIGN.md: raft_meta must not import broker or client
    "broker": {"broker", "client", "log", "raft_meta"},
    "spark_source": {"spark_source", "client", "log"},
    "chaos": {"chaos", "client", "log"},
}
# third-party or standard modules a layer must not use
FORBIDDEN = {
    "log": {"trio", "socket"},
    "client/protocol": {"trio", "socket", "threading"},
    "raft_meta": set(),
}
# only these may touch pysyncobj
PYSYNCOBJ = {"raft_meta"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "raftka":  # `from raftka import X`: X may be a sub-package
                found += [(node.lineno, f"raftka.{alias.name}") for alias in node.names]
    return found


def _modules(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _violations(layer: str, root: Path = REPO) -> list[str]:
    bad = []
    for path in _modules(root, layer):
        rel = path.relative_to(root)
        sub = "client/protocol" if str(rel).startswith("client/protocol/") else layer
        for line, name in _imports(path):
            parts = name.split(".")
            if parts[0] == "raftka":
                target = parts[1] if len(parts) > 1 else None
                if target is None or target not in ALLOWED:
                    bad.append(f"{rel}:{line} imports {name} (the top package sits above every layer)")
                elif target not in ALLOWED[layer]:
                    bad.append(f"{rel}:{line} imports {name} ({layer} may import {sorted(ALLOWED[layer])})")
                elif sub == "client/protocol" and name.split(".")[:3] != ["raftka", "client", "protocol"] \
                        and target == "client":
                    bad.append(f"{rel}:{line} imports {name} (the wire codec imports no SDK module)")
            elif parts[0] in FORBIDDEN.get(sub, set()) | FORBIDDEN.get(layer, set()):
                bad.append(f"{rel}:{line} imports {name} ({sub} is sans-IO / has no sockets)")
            elif parts[0] == "pysyncobj" and layer not in PYSYNCOBJ:
                bad.append(f"{rel}:{line} imports pysyncobj (hidden behind raft_meta's Quorum)")
    return bad


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_follow_the_dag(layer: str) -> None:
    assert _violations(layer) == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The test above can fail: an upward import is reported."""
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "probe.py").write_text("def f():\n    from raftka.broker import node\n    import trio\n")
    found = _violations("log", tmp_path)
    assert any("imports raftka.broker" in v for v in found) and any("imports trio" in v for v in found)
