"""Every file the repository's text points at exists in the repository.

A reader follows a docstring's "see docs/security.md" or a page's link; a move or a
rename that leaves them behind sends the reader nowhere. This test reads:

- the docstrings and comments of every tracked Python file (not its other strings:
  a test may well name a file it creates in a temp folder);
- every tracked markdown page (README.md, docs/*.md, ...) outside its fenced code
  blocks (the files an example names are the reader's, not ours);

and checks three kinds of reference:

- a relative markdown link `[text](target)`, resolved from the page's folder
  (an `#anchor` is dropped; `http:`/`https:`/`mailto:` links are not files);
- a `docs/<name>.md` mention anywhere, resolved from the repository root, and a
  bare `<name>.md` mention, which some file of the repository must be called (the
  design documents once lived outside it under upper-case names, and the code cited
  a principle by the word DESIGN and its number: that form is reported too);
- a repository path `folder/.../name.ext` (or `folder/.../dir/`) whose first part is
  one of the repository's top-level folders, resolved from the repository root.

A path with a placeholder in it (`<topic>-<p>`, `{group,txn}`, `*`) is a pattern,
not a file, and is not checked.

It also holds docs/architecture.md's opening table to the repository: a row per
top-level folder, and per installed package a row naming its folder and package
as `ls` and `pyproject.toml` do.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The repository's top-level folders: a path that starts with one is a repository path.
TOP_FOLDERS = ("bench", "broker", "build_support", "chaos", "client", "docs", "log", "raft_meta",
               "raftka", "spark_source", "tests")
_EXT = r"(?:py|md|toml|txt|json|cfg|properties|lock|java|js|in|sh|gz)"
# `folder/part/.../name.ext` or `folder/part/.../dir/`; no placeholder characters inside,
# and not preceded by a character that would make it part of a longer path or a URL.
_PATH = re.compile(
    r"(?<![\w./<>{}*$~-])"
    rf"((?:{'|'.join(TOP_FOLDERS)})(?:/[\w.-]+)*?(?:/[\w-][\w.-]*\.{_EXT}\b(?![\w/-])|/[\w-][\w.-]*/(?![\w<>{{}}*.-])))"
)
_DOCS_MD = re.compile(r"(?<![\w./-])(docs/[\w.-]+\.md)\b")
_BARE_MD = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")  # a bare name: some file is called that
_OLD_DESIGN = re.compile(r"\bDESIGN\b(?:\.md)?,? principle")  # the principles are docs/design.md's
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def _tracked(root: Path, suffix: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", f"*{suffix}"], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    return [root / line for line in out.splitlines() if line and (root / line).is_file()]


def _python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in a Python module."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return found


def _missing_in(text: str, page_dir: Path, root: Path, *, markdown: bool) -> list[str]:
    missing = []
    if markdown:
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page_dir / path).exists():
                missing.append(target)
    for mention in _DOCS_MD.findall(text) + _PATH.findall(text):
        if not (root / mention).exists():
            missing.append(mention)
    missing += [name for name in _BARE_MD.findall(text) if name not in _file_names(root)]
    missing += [f"{cited} (the principles are docs/design.md's)" for cited in _OLD_DESIGN.findall(text)]
    return missing


@functools.cache
def _file_names(root: Path) -> frozenset[str]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return frozenset(Path(line).name for line in out.splitlines())


def dangling_references(root: Path = REPO) -> list[str]:
    """`file:line: target` for every reference to a file that does not exist."""
    bad = []
    for path in _tracked(root, ".py"):
        rel = path.relative_to(root)
        source = path.read_text(encoding="utf-8")
        if not _missing_in(source, path.parent, root, markdown=False):
            continue  # nothing dangling anywhere in the file: none in its prose (and it is fast)
        for line, text in _python_prose(source):
            for target in _missing_in(text, path.parent, root, markdown=False):
                bad.append(f"{rel}:{line}: {target}")
    for path in _tracked(root, ".md"):
        rel = path.relative_to(root)
        fenced = False
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if text.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            if fenced:
                continue
            for target in _missing_in(text, path.parent, root, markdown=True):
                bad.append(f"{rel}:{number}: {target}")
    return sorted(set(bad))


def test_every_referenced_file_exists() -> None:
    assert dangling_references() == []


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    return tmp_path


@pytest.mark.parametrize(("name", "text", "want"), [
    ("broker/x.py", '"""See docs/nowhere.md."""\n', "broker/x.py:1: docs/nowhere.md"),
    ("broker/x.py", "x = 1  # as in docs/SECURITY.md\n", "broker/x.py:1: docs/SECURITY.md"),
    ("broker/x.py", "# librdkafka's table (TRANSACTIONS.md)\n", "broker/x.py:1: TRANSACTIONS.md"),
    ("broker/x.py", '"""The one exception to DESIGN principle 2."""\n',
     "broker/x.py:1: DESIGN principle (the principles are docs/design.md's)"),
    ("broker/x.py", 'def f():\n    """Started by raftka/client/local_cluster.py."""\n',
     "broker/x.py:2: raftka/client/local_cluster.py"),
    ("docs/page.md", "See [the design](design.md#principles).\n", "docs/page.md:1: design.md#principles"),
    ("README.md", "Read [spark](docs/spark.md) and `log/gone.py`.\n", "README.md:1: docs/spark.md"),
    ("README.md", "Scenarios live in `tests/unit/testdata/gone/`.\n", "README.md:1: tests/unit/testdata/gone/"),
])
def test_a_dangling_reference_is_reported(tmp_path: Path, name: str, text: str, want: str) -> None:
    """The test above can fail: each kind of reference to a missing file is found."""
    root = _repo(tmp_path, {name: text})
    assert want in dangling_references(root)


def test_existing_files_patterns_and_other_strings_pass(tmp_path: Path) -> None:
    root = _repo(tmp_path, {
        "docs/design.md": "Principles. [Top](#principles), [site](https://kafka.apache.org/a.md).\n"
                          "Layout: `<log.dir>/<topic>-<partition>/00000000000000000000.log`, "
                          "`broker/{group,txn}/`, `raft_meta/*/`.\n"
                          "```python\n# tests/test_orders.py: the reader's own file\n```\n",
        "log/segment.py": '"""See docs/design.md and log/segment.py."""\n'
                          'NAME = "docs/made_in_a_temp_dir.md"  # a string, not prose\n',
    })
    assert dangling_references(root) == []


# --- docs/architecture.md's first table: the folders are the packages ---------------------

_ROW = re.compile(r"^\| `([\w/]+)/` \| (?:`([\w.]+)`|not installed)")


def _package_folders(root: Path) -> dict[str, str]:
    """Installed package -> its folder, from pyproject.toml's `packages` and `package-dir`."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {name: folder for name, folder in setuptools["package-dir"].items() if name}
    folders = {}
    for package in setuptools["packages"]:
        base = max((name for name in mapped if package == name or package.startswith(name + ".")),
                   key=len)
        rest = package[len(base):].lstrip(".").replace(".", "/")
        folders[package] = f"{mapped[base]}/{rest}" if rest else mapped[base]
    return folders


def folder_table_problems(root: Path = REPO) -> list[str]:
    """What the folder table at the top of docs/architecture.md gets wrong about the repository."""
    rows = {}
    for line in (root / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        if match := _ROW.match(line):
            rows[match.group(1)] = match.group(2)
    problems = [f"row `{folder}/`: no such folder" for folder in rows if not (root / folder).is_dir()]
    top_folders = {Path(f).parts[0] for f in subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
        if len(Path(f).parts) > 1 and not f.startswith(".")}
    problems += [f"top-level folder `{folder}/` has no row" for folder in sorted(top_folders - set(rows))]
    for package, folder in sorted(_package_folders(root).items()):
        if rows.get(folder) != package:
            problems.append(f"package {package} (folder `{folder}/`) is not a row `{folder}/` | `{package}`")
    return problems


def test_architecture_opens_with_every_folder_and_its_package() -> None:
    assert folder_table_problems() == []


def test_a_folder_or_package_missing_from_the_table_is_reported(tmp_path: Path) -> None:
    """The test above can fail: an unlisted folder, a wrong package and a gone folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "log").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "| folder | installed as | holds |\n|---|---|---|\n"
        "| `log/` | `raftka.logs` | logs |\n| `docs/` | not installed | pages |\n| `gone/` | not installed | x |\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["raftka", "raftka.log"]\n'
        '[tool.setuptools.package-dir]\n"raftka" = "raftka"\n"raftka.log" = "log"\n')
    root = _repo(tmp_path, {"raftka/__init__.py": "", "log/__init__.py": ""})
    assert folder_table_problems(root) == [
        "row `gone/`: no such folder",
        "top-level folder `raftka/` has no row",
        "package raftka (folder `raftka/`) is not a row `raftka/` | `raftka`",
        "package raftka.log (folder `log/`) is not a row `log/` | `raftka.log`",
    ]
