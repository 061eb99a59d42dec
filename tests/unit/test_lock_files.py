"""`make run` installs the runtime lock only; `make test` adds the extras' lock.

requirements.lock must pin exactly the transitive closure of pyproject's `dependencies`
(plus setuptools and wheel, which build the editable install), at the versions
requirements-dev.lock pins, and nothing from the extras (pyspark, matplotlib, pytest...).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
BUILD_TOOLS = {"setuptools", "wheel"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {_norm(name): version for name, version in (line.split("==") for line in lines)}


def _closure(roots: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = [Requirement(r).name for r in roots]
    while stack:
        name = _norm(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        for raw in md.requires(name) or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return seen


def test_the_runtime_lock_is_the_runtime_closure() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = _pins(REPO / "requirements.lock")
    assert set(runtime) == _closure(project["dependencies"]) | BUILD_TOOLS
    dev = _pins(REPO / "requirements-dev.lock")
    assert {name: dev[name] for name in runtime} == runtime
    for extra in ("spark", "chaos", "dev"):
        for raw in project["optional-dependencies"][extra]:
            name = _norm(Requirement(raw).name)
            assert name not in runtime and name in dev, name


def test_make_run_installs_the_runtime_lock_only() -> None:
    plan = subprocess.run(["make", "-n", "-B", "run"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    assert "-r requirements.lock" in plan and "requirements-dev.lock" not in plan
    test_plan = subprocess.run(["make", "-n", "-B", "test"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    assert "-r requirements-dev.lock" in test_plan
