"""cli/runner.py: one table of exit statuses for every command that talks to brokers.

The refusals a live cluster gives (exit 1) are in tests/integration/test_cli_exit_codes.py."""

from __future__ import annotations

import pytest
import trio
from click.testing import CliRunner

from raftka.cli.main import main
from raftka.cli.runner import Refused, UsageError, exit_status, run
from raftka.client.errors import KafkaConnectionError, KafkaError
from tests.support import free_port


@pytest.mark.parametrize(("error", "status"), [
    (KafkaError("TOPIC_ALREADY_EXISTS", code=36), 1),
    (KafkaConnectionError("no broker reachable"), 1),
    (Refused("the group is active"), 1),
    (ConnectionRefusedError("refused"), 1),
    (UsageError("--config 'oops' is not key=value"), 2),
    (ValueError("bootstrap_servers '9092' names no host:port"), 2),
    (KeyboardInterrupt(), 130),
    (RuntimeError("a bug"), None),
    (AssertionError("a bug"), None),
])
def test_exit_status_table(error: BaseException, status: int | None) -> None:
    assert exit_status(error) == status


def _raising(error: BaseException):
    async def main() -> None:
        async with trio.open_nursery() as nursery:  # the error arrives in an exception group
            async def fail() -> None:
                raise error
            nursery.start_soon(fail)
    return main


@pytest.mark.parametrize(("error", "status", "line"), [
    (Refused("topic 'x' does not exist"), 1, "raftka groups reset-offsets: topic 'x' does not exist\n"),
    (UsageError("line 1: no key separator"), 2, "raftka groups reset-offsets: line 1: no key separator\n"),
    (KeyboardInterrupt(), 130, "raftka groups reset-offsets: interrupted\n"),
])
def test_run_prints_one_line_and_returns_the_status(error, status, line, capsys) -> None:
    assert run("groups reset-offsets", _raising(error)) == (status, None)
    assert capsys.readouterr().err == line


def test_run_reraises_a_bug() -> None:
    with pytest.raises(BaseException) as raised:
        run("topics list", _raising(RuntimeError("a bug")))
    assert raised.group_contains(RuntimeError) if isinstance(raised.value, BaseExceptionGroup) \
        else isinstance(raised.value, RuntimeError)


async def _ok() -> str:
    return "done"


def test_run_returns_the_result() -> None:
    assert run("topics list", _ok) == (0, "done")


# Every command that talks to brokers, with its arguments otherwise valid.
COMMANDS = [
    ["topics", "create", "--topic", "t"],
    ["topics", "list"],
    ["topics", "describe", "--topic", "t"],
    ["topics", "delete", "--topic", "t"],
    ["topics", "alter", "--topic", "t", "--partitions", "2"],
    ["groups", "list"],
    # (describe, delete and reset-offsets look for the group's coordinator for 15 s first)
    ["transactions", "list"],
    ["transactions", "describe", "--transactional-id", "tx"],
    ["transactions", "describe-producers", "--topic", "t", "--partition", "0"],
    ["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "0"],
    ["acls", "list"],
    ["acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
    ["acls", "remove", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
    ["configs", "describe", "--entity-type", "topics", "--entity-name", "t"],
    ["configs", "alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1"],
    ["configs", "describe", "--entity-type", "users"],
    ["configs", "alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=1"],
    ["users", "list"],
    ["users", "create", "--user", "u", "--password", "p"],
    ["users", "delete", "--user", "u"],
    ["brokers", "rebalance"],
    ["brokers", "drain", "--node", "1"],
    ["brokers", "unregister", "--id", "1"],
    ["consume", "--topic", "t", "--timeout-ms", "100"],
    ["quorum", "status"],
]


def _invoke(argv: list[str]):
    return CliRunner().invoke(main, argv)


@pytest.fixture(scope="module")
def nobody() -> str:
    """An address where nothing listens: every request is refused at once."""
    return f"127.0.0.1:{free_port()}"


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_an_unreachable_cluster_exits_1_in_one_line(argv: list[str], nobody: str) -> None:
    result = _invoke([*argv, "--bootstrap-server", nobody])
    assert result.exit_code == 1, result.output
    command = " ".join(argv[:2] if argv[0] not in ("consume",) else argv[:1])
    assert result.output.startswith(f"raftka {command}: "), result.output
    assert "Traceback" not in result.output


# Arguments each command refuses before it asks any broker: exit 2, and nothing is sent (the
# address is one where nothing listens, so asking would exit 1).
USAGE = [
    (["topics", "create", "--topic", "t", "--config", "oops"], "'oops' is not key=value"),
    (["topics", "alter", "--topic", "t"], "nothing to change"),
    (["topics", "list", "--bootstrap-server", "9092"], "is not host:port"),
    (["groups", "reset-offsets", "--group", "g", "--topic", "t"], "give exactly one of"),
    (["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "-1"], "must be >= 0"),
    (["acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown operation"),
    (["acls", "list", "--topic", "t", "--resource-pattern-type", "odd"], "resource pattern type"),
    (["acls", "remove", "--operation", "Read"], "name at least one resource"),
    (["configs", "alter", "--entity-type", "topics", "--add-config", "a=b"], "--entity-type topics needs"),
    (["configs", "describe", "--entity-type", "brokers"], "exactly one of --entity-name"),
    (["configs", "alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=x"],
     "a quota is a number"),
    (["reassign", "generate", "--topics-to-move-json-file", "{topics}", "--broker-list", "1,1"],
     "must name distinct brokers"),
    (["reassign", "execute", "--reassignment-json-file", "{bad}"], "is not JSON"),
    (["consume", "--topic", "t", "--offset", "3"], "--offset needs --partition"),
    (["produce", "--topic", "t", "--property", "print.kye=true"], "'print.kye' is not known"),
    (["perf", "produce", "--topic", "t", "--num-records", "1", "--producers", "0"], "not in the range 1<=x<=64"),
]


@pytest.mark.parametrize(("argv", "message"), USAGE, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(USAGE)])
def test_bad_arguments_exit_2(argv: list[str], message: str, nobody: str, tmp_path) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text('{"version": 1, "topics": [{"topic": "t"}]}')
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    argv = [a.format(topics=topics, bad=bad) for a in argv]
    if "--bootstrap-server" not in argv:
        argv = [*argv, "--bootstrap-server", nobody]
    result = _invoke(argv)
    assert result.exit_code == 2, result.output
    assert message in result.output
