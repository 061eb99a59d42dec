"""Every block of README.md runs as shown, against a real cluster the test starts and stops
(docs/design.md, principle 12): the two-minute tour's shell lines against `raftka cluster up`
(what `make run` starts), the SDK's ten lines in a fresh Python, and the pytest example as an
application's own test file. Only the address changes: the cluster listens on free ports, so
127.0.0.1:9092 becomes its first node's address, and a raftka command that talks to brokers
without naming one gets `--bootstrap-server` with that address (the default it would use
against `make run`).

A block no test here runs fails `test_every_readme_block_is_run_by_a_test`, and so does a
block this module claims that the README no longer has. `make run` and `make test` are the
one exception, with the reason in EXCEPTED.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from raftka.cli.main import main as raftka_cli
from raftka.testing.local_cluster import free_port_base
from tests.integration.sdk_broker import REPO, raftka_env
from tests.integration.test_cluster_cli import ClusterUp

README = REPO / "README.md"
README_ADDRESS = "127.0.0.1:9092"  # make run's first node, the default of every raftka command

# (the heading a block is under, its language) -> the test that runs it
RUN_BY = {
    ("A two-minute tour", "sh"): "test_the_tour_runs_as_shown",
    ("The SDK in ten lines", "python"): "test_the_sdk_lines_run_as_shown",
    ("Testing your app with pytest", "python"): "test_the_pytest_example_passes_as_shown",
}
EXCEPTED = {
    ("Two commands", "sh"): (
        "`make run` is the cluster the tour runs against: the tour's test starts the same "
        "`raftka cluster up --nodes 3` its recipe runs (checked against the Makefile), on free ports "
        "so that it never meets a cluster a developer left running. `make test` is the suite this "
        "module belongs to: running it from here would recurse."),
}
EXCEPTED_LINES = {"make run", "make test"}


@dataclass(frozen=True)
class Block:
    heading: str
    language: str
    body: str


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, each with the nearest heading above it."""
    blocks, heading = [], ""
    for match in re.finditer(r"^(#+) ([^\n]*)$|^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if match.group(1):
            heading = match.group(2).strip()
        else:
            blocks.append(Block(heading, match.group(3), match.group(4)))
    return blocks


def unclaimed(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(blocks of `text` no test runs, claims of this module `text` has no block for)."""
    keys = [(b.heading, b.language) for b in readme_blocks(text)]
    claimed = set(RUN_BY) | set(EXCEPTED)
    return [k for k in keys if k not in claimed], sorted(claimed - set(keys))


def readme_block(heading: str, language: str) -> str:
    (block,) = [b.body for b in readme_blocks(README.read_text()) if (b.heading, b.language) == (heading, language)]
    return block


def test_every_readme_block_is_run_by_a_test() -> None:
    text = README.read_text()
    keys = [(b.heading, b.language) for b in readme_blocks(text)]
    assert len(keys) == len(set(keys)), f"two blocks of one language under one heading: {keys}"
    assert unclaimed(text) == ([], []), "README.md blocks no test runs, and claims with no block"
    for name in RUN_BY.values():
        assert callable(globals().get(name)), f"RUN_BY names {name}, which this module does not define"
    for key in EXCEPTED:  # the exception covers `make run` and `make test`, nothing added beside them
        lines = {line.split("#")[0].strip() for line in readme_block(*key).splitlines()} - {""}
        assert lines == EXCEPTED_LINES, f"{key}: {lines}; only {EXCEPTED_LINES} are excepted"
    # The check sees a new block, whatever its language, and a block that went away.
    added, _ = unclaimed(text + "\n## Something new\n\n```sh\nraftka topics list\n```\n")
    assert added == [("Something new", "sh")]
    _, gone = unclaimed(text.replace("## The SDK in ten lines", "## Renamed"))
    assert gone == [("The SDK in ten lines", "python")]


@contextmanager
def cluster_up(data_dir: Path, python: Path = Path(sys.executable),
               env: dict[str, str] | None = None) -> Iterator[str]:
    """`raftka cluster up --nodes 3` (what `make run` runs) on free ports; its first node's
    address. Ctrl-C (SIGINT) at the end, as a user stops it, must stop it cleanly."""
    base = free_port_base(3, offsets=(0, 1, 2, 3))  # clients, quorum, control RPC, metrics
    up = ClusterUp(data_dir, base, python, env, cwd=data_dir.parent)  # where the user runs it
    try:
        up.wait_ready()
        yield f"127.0.0.1:{base}"
        assert up.interrupt() == 0
    finally:
        if up.proc.poll() is None:
            up.proc.kill()


# --- running the tour's shell lines ----------------------------------------------------------

def _command(argv: list[str]) -> click.Command:
    """The raftka (sub)command an argv after `raftka` names."""
    command: click.Command = raftka_cli
    for token in argv:
        if not isinstance(command, click.Group) or token.startswith("-"):
            break
        found = command.get_command(click.Context(command), token)
        assert found is not None, f"raftka has no command {token!r} (README argv {argv})"
        command = found
    return command


def _takes(command: click.Command, option: str) -> bool:
    return any(option in getattr(p, "opts", ()) for p in command.params)


def localize(line: str, raftka: Path, address: str) -> str:
    """A README shell line as this test runs it: `.venv/bin/raftka` -> this venv's, the
    address -> the test cluster's, and `--bootstrap-server` added where the README leaves the
    default. Only pipelines of simple commands are understood; anything else fails."""
    code = line.split("  #")[0].strip()
    assert not re.search(r"[;&<>`$]|\|\|", code), f"README line {line!r}: this test runs simple pipelines only"
    stages = []
    for stage in code.split("|"):
        argv = shlex.split(stage)
        if argv[0] == ".venv/bin/raftka":
            argv = [str(raftka), *(a.replace(README_ADDRESS, address) for a in argv[1:])]
            if _takes(_command(argv[1:]), "--bootstrap-server") and "--bootstrap-server" not in argv:
                argv += ["--bootstrap-server", address]
        else:
            assert "raftka" not in stage, f"README line {line!r}: raftka is run as .venv/bin/raftka in the tour"
        stages.append(shlex.join(argv))
    return " | ".join(stages)


def test_localize_changes_only_the_address() -> None:
    raftka = Path("/v/bin/raftka")
    assert localize("seq 1 5 | .venv/bin/raftka produce --topic demo", raftka, "h:1") == \
        "seq 1 5 | /v/bin/raftka produce --topic demo --bootstrap-server h:1"
    assert localize(".venv/bin/raftka quorum status --bootstrap-server 127.0.0.1:9092", raftka, "h:1") == \
        "/v/bin/raftka quorum status --bootstrap-server h:1"
    assert localize(".venv/bin/raftka cluster kill --node 2     # a crash", raftka, "h:1") == \
        "/v/bin/raftka cluster kill --node 2"  # the control socket is found by --data-dir's default
    with pytest.raises(AssertionError, match="simple pipelines only"):
        localize(".venv/bin/raftka perf produce --topic fo &", raftka, "h:1")


def run_tour(python: Path, cwd: Path, env: dict[str, str]) -> None:
    """The tour's shell lines, in order, with `python`'s raftka (a checkout's or an installed
    wheel's) against a `cluster up` started in `cwd`; asserts what the tour says it shows."""
    raftka = python.parent / "raftka"
    assert raftka.exists(), f"no raftka script beside {python}"
    ran: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    # `cluster kill|status|start` find the cluster by --data-dir's default, ./cluster-data.
    with cluster_up(cwd / "cluster-data", python, env) as address:
        for line in readme_block("A two-minute tour", "sh").splitlines():
            if line.strip():
                done = subprocess.run(localize(line, raftka, address), shell=True, cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=180)
                assert done.returncode == 0, (line, done.stdout, done.stderr)
                ran.append((line, done))
    outputs = {}
    for line, done in ran:
        outputs.setdefault(line.split("  #")[0].strip(), []).append(done.stdout)
    consumed = outputs[".venv/bin/raftka consume --topic demo --from-beginning --max-messages 5"]
    assert [sorted(out.split()) for out in consumed] == [["1", "2", "3", "4", "5"]] * 2, consumed
    assert "node 2: down (signal SIGKILL)" in outputs[".venv/bin/raftka cluster status"][0]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_tour_runs_as_shown(tmp_path: Path) -> None:
    """From this checkout; tests/packaging runs the same tour from an installed wheel."""
    recipe = (REPO / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "raftka cluster up --nodes 3" in recipe, f"make run no longer starts what this test starts: {recipe}"
    run_tour(Path(sys.executable), tmp_path, raftka_env())


# --- the Python blocks -----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_sdk_lines_run_as_shown(tmp_path: Path) -> None:
    with cluster_up(tmp_path / "cluster-data") as address:  # RF 3: the ten lines need three brokers
        code = readme_block("The SDK in ten lines", "python").replace(README_ADDRESS, address)
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=raftka_env(), capture_output=True,
                              text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "value=b'hello'" in done.stdout and "key=b'k'" in done.stdout, done.stdout


@pytest.mark.timeout(300)
def test_the_pytest_example_passes_as_shown(tmp_path: Path) -> None:
    """The block is an application's test file; pytest finds raftka's plugin by its entry point."""
    code = readme_block("Testing your app with pytest", "python")
    path = re.match(r"# (\S+\.py):", code)
    assert path, f"the pytest block should open with the file it is: {code.splitlines()[0]!r}"
    app = tmp_path / "app"
    (app / path.group(1)).parent.mkdir(parents=True)
    (app / path.group(1)).write_text(code)
    env = {k: v for k, v in raftka_env().items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'basetemp'}", path.group(1)],
                          cwd=app, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
