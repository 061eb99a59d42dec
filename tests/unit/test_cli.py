import subprocess
import sys

import pytest
from click.testing import CliRunner

from raftka.cli import NOT_BUILT_EXIT, main

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


@pytest.mark.parametrize("argv", [["perf", "consume"], ["perf", "produce"]])
def test_unbuilt_commands_say_so_and_fail(argv):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == NOT_BUILT_EXIT
    assert "not built yet" in result.output


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "raftka", "--version"], capture_output=True, text=True, check=True)
    assert "raftka" in out.stdout
