"""The one command runner: how a CLI command runs its work against a cluster, and the one table
of exit statuses every command that talks to brokers shares.

    0    done
    1    the cluster said no (a KafkaError), could not be reached, or its state refuses the
         request (`Refused`: the topic does not exist, the group is active, ...)
    2    bad arguments or input, wrong whatever the cluster's state: click's usage errors,
         `UsageError`, and a ValueError from the SDK (a malformed --bootstrap-server, ...)
    130  interrupted (Ctrl-C)

Kafka's tools exit 1 for every failure; raftka keeps click's 2 for a usage error, as kafka-topics
counts an invalid argument as one (it prints the usage), so a script can tell a wrong invocation
from a refusal. An error is one line on stderr, `raftka <command>: <error>`, never a traceback.

`run` is the runner; `run_with_cluster` (a Cluster) and `run_with_admin` (an AsyncAdmin) open
the client with the --command-config security and close it afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
import trio

from raftka.cli.options import security as command_security
from raftka.client.admin import AsyncAdmin
from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError

T = TypeVar("T")
TIMEOUT_MS = 15000

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130


class UsageError(ValueError):
    """Bad arguments or input (exit 2)."""


class Refused(Exception):
    """The cluster's state does not allow the request, found by asking it (exit 1)."""


def fail(command: str, message: str, status: int = FAILED) -> int:
    """Print `raftka <command>: <message>` on stderr; return `status`."""
    click.echo(f"raftka {command}: {message}", err=True)
    return status


def exit_status(error: BaseException) -> int | None:
    """The exit status for an error a command reports in one line, or None (a bug: re-raised)."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(error, ValueError):  # UsageError, and the SDK's checks of its arguments
        return USAGE
    if isinstance(error, (KafkaError, Refused, OSError)):
        return FAILED
    return None


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups, or `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def run(command: str, main: Callable[[], Awaitable[T]]) -> tuple[int, T | None]:
    """(0, trio.run(main)), or (status, None) after printing the error (see the module)."""
    try:
        return OK, trio.run(main)
    except BaseException as exc:  # noqa: BLE001 - sorted by exit_status; anything else re-raised
        leaf = _leaf(exc)
        status = exit_status(leaf)
        if status is None:
            raise
        return fail(command, "interrupted" if status == INTERRUPTED else str(leaf), status), None


def run_with_cluster(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]],
                     timeout_ms: int = TIMEOUT_MS) -> tuple[int, T | None]:
    """`run` with a Cluster (client id `raftka-<tool>`) for `action`."""
    async def main() -> T:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(bootstrap, nursery, client_id=f"raftka-{command.split()[0]}",
                              request_timeout_ms=timeout_ms, security=command_security())
            try:
                return await action(cluster)
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    return run(command, main)


def run_with_admin(command: str, bootstrap: str, action: Callable[[AsyncAdmin], Awaitable[T]],
                   timeout_ms: int = TIMEOUT_MS, **admin_options: Any) -> tuple[int, T | None]:
    """`run` with a started AsyncAdmin for `action`."""
    async def main() -> T:
        # A command fails at once when no broker answers (default_api_timeout_ms=0), as it did
        # before the SDK's clients learnt to wait for a cluster that is down.
        options = {"default_api_timeout_ms": 0, **admin_options}
        async with AsyncAdmin(bootstrap, request_timeout_ms=timeout_ms, security=command_security(),
                              **options) as admin:
            return await action(admin)

    return run(command, main)
