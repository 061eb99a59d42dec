"""The first hour (#31): what raftka prints for people must work as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from raftka.cli.chaos import plot_warning
from raftka.cli.main import main
from raftka.testing.secure_cluster import SecureSetup


def test_the_secure_sdk_snippet_runs_as_printed(tmp_path: Path):
    # `cluster up --secure` prints a snippet for the SDK: with the names imported from `raftka`
    # (as a user would), its security object evaluates against the printed properties file.
    setup = SecureSetup(tmp_path, tmp_path / "ca.pem", "admin", "pw", "bpw")
    setup.client_properties_path.write_text(setup.client_properties())
    snippet = setup.settings("127.0.0.1:9093").split("raftka SDK:", 1)[1]
    call = re.search(r"security=(ClientSecurity\.from_properties\(.*\)\))\)", " ".join(snippet.split()))
    assert call is not None, snippet
    namespace: dict = {}
    exec("from raftka import ClientSecurity, Producer, read_properties_file", namespace)
    security = eval(call.group(1), namespace)
    assert (security.security_protocol, security.sasl_username) == ("SASL_SSL", "admin")


def test_the_chaos_plot_hint_keeps_the_extra_in_brackets():
    console = Console(record=True, width=200)
    console.print(plot_warning("plots skipped: matplotlib is not installed (pip install 'raftka[chaos]')"))
    assert "pip install 'raftka[chaos]'" in console.export_text()


@pytest.mark.parametrize("args", [
    ["topics", "create", "--topic", "t", "--partitions", "-1"],
    ["topics", "create", "--topic", "t", "--partitions", "0"],
    ["topics", "create", "--topic", "t", "--replication-factor", "-1"],
    ["topics", "alter", "--topic", "t", "--partitions", "-1"],
])
def test_topic_counts_below_one_are_refused_before_any_request(args):
    # An unused port: the command must fail on the value, never reach for a broker.
    result = CliRunner().invoke(main, [*args[:2], "--bootstrap-server", "127.0.0.1:1", *args[2:]])
    assert result.exit_code == 2, result.output
    assert "x>=1" in result.output and "--" + args[-2].lstrip("-") in result.output
