"""`raftka share-groups list|describe|delete|delete-offsets|reset-offsets`: kafka-share-groups.sh's
verbs and tables, over client/share_group_admin.py.

Each returns the exit status (cli/runner.py): 0 done, 1 the cluster said no or was unreachable
(the group does not exist, has members, ...), 2 bad arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from raftka.cli.groups import _partitions, _table, plan_offsets
from raftka.cli.runner import Refused, run_with_cluster
from raftka.client.cluster import Cluster
from raftka.client.offset_reset import ResetScenario
from raftka.client.records import TopicPartition
from raftka.client.share_group_admin import (
    ShareGroupView,
    ShareOffset,
    alter_share_group_offsets,
    delete_share_group,
    delete_share_group_offsets,
    describe_share_group,
    describe_share_group_offsets,
    list_share_groups,
)

T = TypeVar("T")
INACTIVE = ("Empty", "Dead")


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    return run_with_cluster(f"share-groups {command}", bootstrap, action)


def _dash(value: int) -> str:
    return "-" if value < 0 else str(value)


def list_cmd(bootstrap: str, with_state: bool) -> int:
    status, groups = _run("list", bootstrap, list_share_groups)
    if with_state and groups is not None:
        _table([("GROUP", "STATE"), *groups])
    else:
        for group_id, _state in groups or []:
            click.echo(group_id)
    return status


def describe_cmd(bootstrap: str, group_id: str, what: str, verbose: bool) -> int:
    """`what`: "offsets" (the default), "members" or "state", as kafka-share-groups --describe."""

    async def action(cluster: Cluster) -> tuple[ShareGroupView, list[ShareOffset], str]:
        view = await describe_share_group(cluster, group_id)
        offsets = await describe_share_group_offsets(cluster, group_id) if what == "offsets" else []
        broker = cluster.metadata.broker(view.coordinator_id)
        coordinator = f"{broker.host}:{broker.port}" if broker is not None else "-"
        return view, offsets, coordinator

    status, found = _run("describe", bootstrap, action)
    if found is None:
        return status
    view, offsets, coordinator = found
    if what == "offsets":
        header = ("GROUP", "TOPIC", "PARTITION") + (("LEADER-EPOCH",) if verbose else ()) + ("START-OFFSET", "LAG")
        _table([header, *((group_id, o.tp.topic, str(o.tp.partition)) + ((_dash(o.leader_epoch),) if verbose else ())
                          + (_dash(o.start_offset), _dash(o.lag)) for o in offsets)])
    elif what == "state":
        epochs = ("GROUP-EPOCH", "ASSIGNMENT-EPOCH") if verbose else ()
        _table([("GROUP", "COORDINATOR (ID)", "STATE") + epochs + ("#MEMBERS",),
                (group_id, f"{coordinator} ({view.coordinator_id})", view.state)
                + ((str(view.group_epoch), str(view.assignment_epoch)) if verbose else ())
                + (str(len(view.members)),)])
    elif not view.members:
        click.echo(f"Share group '{group_id}' has no active members.")
    else:
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS") + (("MEMBER-EPOCH",) if verbose else ())
        _table([header + ("ASSIGNMENT",), *((group_id, m.member_id, m.host, m.client_id, str(len(m.assignment)))
                                            + ((str(m.member_epoch),) if verbose else ()) + (_partitions(m.assignment),)
                                            for m in view.members)])
    return status


def delete_cmd(bootstrap: str, group_id: str) -> int:
    status, _ = _run("delete", bootstrap, lambda c: delete_share_group(c, group_id))
    if status == 0:
        click.echo(f"Deleted share group {group_id!r}.")
    return status


def delete_offsets_cmd(bootstrap: str, group_id: str, topics: tuple[str, ...]) -> int:
    status, _ = _run("delete-offsets", bootstrap, lambda c: delete_share_group_offsets(c, group_id, topics))
    if status == 0:
        _table([("TOPIC", "STATUS"), *((t, "Successful") for t in dict.fromkeys(topics))])
    return status


def reset_offsets_cmd(bootstrap: str, group_id: str, topics: tuple[str, ...], all_topics: bool,
                      scenario: ResetScenario, execute: bool) -> int:
    """kafka-share-groups --reset-offsets: print the plan (GROUP TOPIC PARTITION NEW-OFFSET) and,
    with --execute, apply it (AlterShareGroupOffsets). Refused while the group has members."""

    async def action(cluster: Cluster) -> dict[TopicPartition, int]:
        view = await describe_share_group(cluster, group_id)
        if view.state not in INACTIVE:
            raise Refused(f"share group {group_id!r} is {view.state} with {len(view.members)} member(s); "
                          "its offsets can only be reset while it has none")
        current = {o.tp: o.start_offset for o in await describe_share_group_offsets(cluster, group_id)
                   if o.start_offset >= 0}
        plan = await plan_offsets(cluster, topics, all_topics, scenario, current,
                                  f"share group {group_id!r} has no offsets yet; name the topics with --topic")
        if execute:
            await alter_share_group_offsets(cluster, group_id, plan)
        return plan

    status, plan = _run("reset-offsets", bootstrap, action)
    if plan is None:
        return status
    _table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
            *((group_id, tp.topic, str(tp.partition), str(o)) for tp, o in sorted(plan.items()))])
    if not execute:
        click.echo("(dry run: nothing was changed; add --execute to apply these offsets)", err=True)
    return 0
