"""mypy over the product as it installs: `python -m tests.typecheck` (`make lint` runs it).

The folders install as sub-packages of `raftka` (pyproject.toml's `package-dir`: `broker/` is
`raftka.broker`), and the editable install serves them through an import hook that mypy
cannot follow. So this builds the installed layout out of symbolic links under
`.mypy_cache/layout/` (git and ruff ignore `.mypy_cache`), runs mypy there with
pyproject.toml's `[tool.mypy]`, and prints each error with its path in the repository.

The strict set (the pure cores and the wire codec) and the lenient rest are configured in
pyproject.toml; tests/unit/test_typecheck.py fails `make test` on any error.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / ".mypy_cache" / "layout"
TOP = "raftka"


@cache
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def package_dirs() -> dict[str, str]:
    """pyproject.toml's package-dir for the `raftka` namespace: package -> folder."""
    mapping = pyproject()["tool"]["setuptools"]["package-dir"]
    return {pkg: folder for pkg, folder in mapping.items() if pkg.startswith(f"{TOP}.")}


def strict_modules() -> list[str]:
    """The strict set: the modules (or `pkg.*` patterns) of [tool.mypy]'s strict override."""
    for override in pyproject()["tool"]["mypy"]["overrides"]:
        if override.get("disallow_untyped_defs"):
            return list(override["module"])
    return []


def repo_path(module: str) -> str:
    """Where a module (or a `pkg.*` pattern: its folder) is in the repository."""
    parts = module.removesuffix(".*").split(".")
    for cut in range(len(parts), 1, -1):
        folder = package_dirs().get(".".join(parts[:cut]))
        if folder is not None:
            path = "/".join([folder, *parts[cut:]])
            break
    else:
        path = "/".join(parts)
    if module.endswith(".*") or (REPO / path).is_dir():
        return path + "/"
    return path + ".py"


def build_layout() -> dict[str, str]:
    """Link the installed layout under LAYOUT; return {layout prefix: repository prefix}."""
    top = LAYOUT / TOP
    top.mkdir(parents=True, exist_ok=True)
    links = {entry.name: REPO / TOP / entry.name for entry in (REPO / TOP).iterdir()
             if entry.name != "__pycache__"}
    for pkg, folder in package_dirs().items():
        if pkg.count(".") == 1:  # a nested mapping sits inside its parent's folder
            links[pkg.split(".", 1)[1]] = REPO / folder
    for old in top.iterdir():
        if old.name not in links or not old.is_symlink() or old.readlink() != links[old.name]:
            old.unlink()
    for name, target in links.items():
        if not (top / name).is_symlink():
            (top / name).symlink_to(target)
    return {f"{(top / name).relative_to(REPO)}": os.path.relpath(target, REPO)
            for name, target in links.items()}


def run(extra: list[str] | None = None) -> tuple[str, int]:
    """mypy over the raftka package: (its report with repository paths, its exit status)."""
    from mypy import api

    prefixes = build_layout()
    stdout, stderr, status = api.run([
        "--config-file", str(REPO / "pyproject.toml"),
        "--cache-dir", str(REPO / ".mypy_cache"),
        "-p", TOP, *(extra or []),
    ])
    pattern = re.compile("|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True)))
    report = pattern.sub(lambda m: prefixes[m.group(0)], stdout + stderr)
    return report, status


def main() -> int:
    os.chdir(REPO)
    report, status = run(sys.argv[1:])
    print(report, end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
