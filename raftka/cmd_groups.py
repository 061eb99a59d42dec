"""`raftka groups list|describe|delete`: kafka-consumer-groups.sh's verbs.

Each returns the exit status: 0 done, 1 the cluster said no or was unreachable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError
from raftka.client.group_admin import delete_group, describe_group, list_groups
from raftka.command_config import security as command_security

T = TypeVar("T")
TIMEOUT_MS = 15000


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    async def main() -> T:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(bootstrap, nursery, client_id="raftka-groups", request_timeout_ms=TIMEOUT_MS,
                              security=command_security())
            try:
                return await action(cluster)
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    try:
        return 0, trio.run(main)
    except (KafkaError, ValueError) as exc:
        click.echo(f"raftka groups {command}: {exc}", err=True)
        return 1, None


def list_cmd(bootstrap: str) -> int:
    status, groups = _run("list", bootstrap, list_groups)
    for group_id, _protocol_type in groups or []:
        click.echo(group_id)
    return status


def describe_cmd(bootstrap: str, group_id: str) -> int:
    status, view = _run("describe", bootstrap, lambda c: describe_group(c, group_id))
    if view is None:
        return status
    click.echo(f"GROUP {view.group_id}  STATE {view.state}  PROTOCOL {view.protocol or '-'}  "
               f"MEMBERS {len(view.members)}")
    # Static members (group.instance.id) get Kafka's GROUP-INSTANCE-ID column; dynamic groups
    # keep kafka-consumer-groups' usual layout.
    static = any(m.group_instance_id for m in view.members)
    header = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
    rows = [header + (("GROUP-INSTANCE-ID",) if static else ())]
    members = {m.member_id: m for m in view.members}

    def instance(m) -> tuple[str, ...]:
        return ((m.group_instance_id or "-") if m else "-",) if static else ()

    for p in view.partitions:
        m = members.get(p.member_id or "")
        rows.append((p.tp.topic, str(p.tp.partition), _dash(p.committed), _dash(p.log_end), _dash(p.lag),
                     p.member_id or "-", m.host if m else "-", m.client_id if m else "-") + instance(m))
    for m in view.members:
        if not m.assignment:
            rows.append(("-", "-", "-", "-", "-", m.member_id, m.host, m.client_id) + instance(m))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return status


def delete_cmd(bootstrap: str, group_id: str) -> int:
    status, _ = _run("delete", bootstrap, lambda c: delete_group(c, group_id))
    if status == 0:
        click.echo(f"Deleted consumer group {group_id!r}.")
    return status


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
