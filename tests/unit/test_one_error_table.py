"""Kafka's error codes have one table: `ErrorCode` in client/protocol/errors.py, the base layer
every other layer imports. This test reads every module outside client/protocol and fails on a
copy of that table or of one of its codes:

- a dict literal mapping Kafka error names to numbers (or numbers to names);
- a name of ErrorCode's bound to a number (`NOT_CONTROLLER = 41`; enum bodies of other
  meanings, like a codec's `NONE = 0`, are not error codes);
- a class's `code` / `error_code` bound to a number other than 0;
- a `code=` / `error_code=` argument, or a comparison of a `code` / `error_code`, with a number
  other than 0 (0 is "no error" everywhere in Kafka's protocol and is left bare).

Write `ErrorCode.NOT_CONTROLLER` (or `int(ErrorCode.NOT_CONTROLLER)` where a plain int matters).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftka.client.protocol import ErrorCode

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("broker", "raft_meta", "log", "client", "raftka", "spark_source", "chaos")
PROTOCOL = Path("client/protocol")
CODE_NAMES = ("code", "error_code")
NAMES = frozenset(ErrorCode.__members__)


def _number(node: ast.AST | None) -> int | None:
    """The int a literal (or a negated literal) spells; None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _name(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _attr(node: ast.AST) -> str | None:
    """`code` for `code`, `exc.code`, `response.error_code`..."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_enum(node: ast.ClassDef) -> bool:
    return any((_attr(base) or "").endswith(("Enum", "Flag")) for base in node.bases)


def _copies(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    enum_bodies = {id(stmt) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and _is_enum(node)
                   for stmt in node.body}
    class_bodies = {id(stmt) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for stmt in node.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            pairs = [(_name(k), _number(v)) for k, v in zip(node.keys, node.values, strict=True)]
            pairs += [(_name(v), _number(k)) for k, v in zip(node.keys, node.values, strict=True)]
            named = [name for name, number in pairs if name in NAMES and number is not None]
            if len(named) >= 2:
                found.append((node.lineno, f"a table of Kafka error codes ({', '.join(named[:3])}, ...)"))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and id(node) not in enum_bodies:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            number = _number(node.value)
            for target in targets:
                name = _attr(target) if isinstance(target, ast.Name) else None
                if number is None or name is None:
                    continue
                if name in NAMES:
                    found.append((node.lineno, f"{name} = {number} copies ErrorCode.{name}"))
                elif name in CODE_NAMES and number != 0 and id(node) in class_bodies:
                    found.append((node.lineno, f"{name} = {number}: a bare Kafka error code"))
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                number = _number(keyword.value)
                if keyword.arg in CODE_NAMES and number not in (None, 0):
                    found.append((node.lineno, f"{keyword.arg}={number}: a bare Kafka error code"))
        elif isinstance(node, ast.Compare) and _attr(node.left) in CODE_NAMES:
            for right in node.comparators:
                number = _number(right)
                if number not in (None, 0):
                    found.append((node.lineno, f"{_attr(node.left)} compared with {number}: a bare Kafka error code"))
    return found


def _violations(root: Path = REPO) -> list[str]:
    bad = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            if "__pycache__" in rel.parts or rel.is_relative_to(PROTOCOL):
                continue
            tree = ast.parse(path.read_text(), filename=str(rel))
            bad += [f"{rel}:{line}: {what}; use client/protocol's ErrorCode" for line, what in sorted(_copies(tree))]
    return bad


def test_no_module_outside_the_protocol_copies_the_error_codes() -> None:
    assert _violations() == []


def test_the_checker_sees_each_kind_of_copy(tmp_path: Path) -> None:
    """The test above can fail: each kind of copy in a probe module is reported, and the
    forms the codebase uses (ErrorCode members, 0 for no error, enums of other meanings) are not."""
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "probe.py").write_text(
        'TABLE = {"NOT_CONTROLLER": 41, "INVALID_CONFIG": 40}\n'
        "NOT_COORDINATOR = 16\n"
        "class Refused(Exception):\n    code = 6\n"
        "def f(exc, response):\n"
        "    g(error_code=-1)\n"
        "    return exc.code == 41 or response.error_code != 3\n"
    )
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "fine.py").write_text(
        "import enum\nfrom raftka.client.protocol import ErrorCode\n"
        "class Codec(enum.IntEnum):\n    NONE = 0\n"
        "NONE = int(ErrorCode.NONE)\n"
        "class Refused(Exception):\n    code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)\n"
        "def f(exc, response):\n"
        "    g(error_code=0)\n"
        "    return exc.code == ErrorCode.NOT_CONTROLLER or response.error_code == 0\n"
    )
    found = _violations(tmp_path)
    assert [v.split(": ", 1)[0] for v in found] == [
        "broker/probe.py:1", "broker/probe.py:2", "broker/probe.py:4", "broker/probe.py:6",
        "broker/probe.py:7", "broker/probe.py:7",
    ], found


def test_a_controller_error_carries_an_error_code() -> None:
    """ControllerError holds one of ErrorCode's members (its number and Kafka's name); a
    name sent by a peer decodes through the same table, UNKNOWN_SERVER_ERROR when unknown."""
    from raftka.raft_meta.controller.controller_errors import ControllerError

    error = ControllerError(ErrorCode.NOT_CONTROLLER, "no quorum leader yet")
    assert (error.code, error.name, error.message) == (41, "NOT_CONTROLLER", "no quorum leader yet")
    assert str(error) == "NOT_CONTROLLER: no quorum leader yet"
    with pytest.raises(TypeError, match="expected an ErrorCode member"):
        ControllerError(41, "a bare number")  # type: ignore[arg-type]
    assert ControllerError.named("INELIGIBLE_REPLICA", "m").code == 107
    assert ControllerError.named("NO_SUCH_ERROR", "m").name == "UNKNOWN_SERVER_ERROR"
