"""The layering of docs/architecture.md, checked on the imports themselves.

The folders install as sub-packages of `raftka` (raftka.log, raftka.client, ...),
so import graphs drawn by folder cannot see `raftka.broker` -> `broker/`; this
test reads every module's imports (including those inside functions) and holds
them against the DAG:

    client/protocol  (the wire codec and Kafka's error codes: the base every layer may import)
    log  <-  client  <-  broker  ->  raft_meta  ->  log
    spark_source -> client;  testing -> broker, raft_meta, client;  chaos -> testing;  cli -> all

Nothing imports the top package `raftka` itself, which sits above every layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROTOCOL = "client/protocol"
TOP = "raftka"  # the top package's own names: __version__, the lazily re-exported SDK
# layer -> its folder in the repository (raftka.<layer> installs from there)
FOLDERS = {
    PROTOCOL: "client/protocol", "log": "log", "client": "client", "raft_meta": "raft_meta",
    "broker": "broker", "spark_source": "spark_source", "testing": "raftka/testing",
    "chaos": "chaos", "cli": "raftka/cli",
}
# layer -> the layers it may import (itself included)
ALLOWED = {
    PROTOCOL: {PROTOCOL},
    "log": {"log", PROTOCOL},
    "client": {"client", "log", PROTOCOL},
    "raft_meta": {"raft_meta", "log", PROTOCOL},  # raft_meta must not import broker or the SDK
    "broker": {"broker", "client", "log", "raft_meta", PROTOCOL},
    "spark_source": {"spark_source", "client", "log", PROTOCOL},
    "testing": {"testing", "broker", "client", "log", "raft_meta", PROTOCOL},
    "chaos": {"chaos", "testing", "client", "log", "raft_meta", PROTOCOL},
    "cli": {*FOLDERS, TOP},
}
# third-party or standard modules a layer must not use
FORBIDDEN = {
    "log": {"trio", "socket"},
    PROTOCOL: {"trio", "socket", "threading"},
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
            if node.module != "raftka":
                found.append((node.lineno, node.module))
            if node.module in ("raftka", "raftka.client"):  # `from raftka import x`: x may be a package
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _target(name: str) -> str:
    """The layer of an imported `raftka...` name; TOP for the top package's own names."""
    parts = name.split(".")[1:]
    if parts[:2] == ["client", "protocol"]:
        return PROTOCOL
    return parts[0] if parts and parts[0] in FOLDERS else TOP


def _layer_of(rel: Path) -> str:
    posix = rel.as_posix()
    return max((lay for lay, folder in FOLDERS.items() if posix.startswith(folder + "/")),
               key=lambda lay: len(FOLDERS[lay]))


def _modules(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _violations(layer: str, root: Path = REPO) -> list[str]:
    bad = []
    for path in _modules(root, FOLDERS[layer]):
        rel = path.relative_to(root)
        if _layer_of(rel) != layer:  # client/protocol/ inside client/: checked as its own layer
            continue
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top == "raftka":
                target = _target(name)
                if target == TOP and TOP not in ALLOWED[layer]:
                    bad.append(f"{rel}:{line} imports {name} (the top package sits above every layer)")
                elif target not in ALLOWED[layer]:
                    bad.append(f"{rel}:{line} imports {name} ({layer} may import {sorted(ALLOWED[layer])})")
            elif top in FORBIDDEN.get(layer, set()):
                bad.append(f"{rel}:{line} imports {name} ({layer} is sans-IO / has no sockets)")
            elif top == "pysyncobj" and layer not in PYSYNCOBJ:
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
