"""Run one admin action against a cluster from a CLI command (`raftka groups`, `acls`,
`reassign`, `brokers`, `transactions`): a Cluster with the --command-config security, closed afterwards; a Kafka or
usage error is printed as `raftka <tool> <command>: <error>` and gives exit status 1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import trio

from raftka.cli.options import security as command_security
from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError

T = TypeVar("T")
TIMEOUT_MS = 15000


def run_with_cluster(tool: str, command: str, bootstrap: str,
                     action: Callable[[Cluster], Awaitable[T]],
                     expected: tuple[type[BaseException], ...] = (),
                     timeout_ms: int = TIMEOUT_MS) -> tuple[int, T | None]:
    """(0, result) or (1, None) after printing the error; `expected` adds error types that
    are reported the same way (besides KafkaError and ValueError)."""
    async def main() -> T:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(bootstrap, nursery, client_id=f"raftka-{tool}",
                              request_timeout_ms=timeout_ms, security=command_security())
            try:
                return await action(cluster)
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    try:
        return 0, trio.run(main)
    except BaseException as exc:
        leaf = exc  # the one error inside the nursery's exception group(s)
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if not isinstance(leaf, (KafkaError, ValueError, *expected)):
            raise
        click.echo(f"raftka {tool} {command}: {leaf}", err=True)
        return 1, None
