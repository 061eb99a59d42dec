import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from raftka.cli import NOT_BUILT_EXIT, _placeholder, main

TREE = {
    "storage": ["random-uuid", "format"],
    "server": ["start"],
    "cluster": ["up"],
    "quorum": ["status"],
    "topics": ["create", "list", "describe", "delete", "alter"],
    "groups": ["list", "describe", "delete"],
    "log": ["dump"],
    "perf": ["produce", "consume"],
    "chaos": ["run"],
}


def test_help_lists_the_whole_tree():
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0
    for name in [*TREE, "produce", "consume"]:
        assert f"  {name} " in top.output
    for group, subs in TREE.items():
        result = runner.invoke(main, [group, "--help"])
        assert result.exit_code == 0, result.output
        for sub in subs:
            assert f"  {sub} " in result.output or f"  {sub}\n" in result.output, (group, sub)


def _tree_with_a_placeholder() -> click.Group:
    # Every command of the real tree is built now; the mechanism stays for new ones.
    @click.group()
    def root() -> None:
        pass

    @root.group()
    def future() -> None:
        pass

    _placeholder(future, "thing", 99, "the future thing", "Do a future thing.")
    return root


@pytest.mark.parametrize("argv", [["future", "thing"], ["future", "thing", "--any", "arg"]])
def test_unbuilt_commands_say_so_and_fail(argv):
    result = CliRunner().invoke(_tree_with_a_placeholder(), argv)
    assert result.exit_code == NOT_BUILT_EXIT
    assert "not built yet" in result.output


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "raftka", "--version"], capture_output=True, text=True, check=True)
    assert "raftka" in out.stdout
