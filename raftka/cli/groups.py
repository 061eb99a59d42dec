"""`raftka groups list|describe|delete|reset-offsets`: kafka-consumer-groups.sh's verbs.

Each returns the exit status (cli/runner.py): 0 done, 1 the cluster said no or was unreachable
(or the group does not exist / is active), 2 bad arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from raftka.cli.runner import Refused, run_with_cluster
from raftka.client.cluster import Cluster
from raftka.client.errors import UnknownTopicOrPartitionError
from raftka.client.group_admin import GroupView, delete_group, describe_group, list_groups
from raftka.client.group_membership import GroupMembership, OffsetAndMetadata
from raftka.client.list_offsets import EARLIEST, LATEST, list_offsets
from raftka.client.offset_reset import ResetScenario, parse_topic_partitions, plan_reset
from raftka.client.records import TopicPartition

T = TypeVar("T")
TIMEOUT_MS = 15000


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    return run_with_cluster(f"groups {command}", bootstrap, action)


def list_cmd(bootstrap: str) -> int:
    status, groups = _run("list", bootstrap, list_groups)
    for group_id, _protocol_type in groups or []:
        click.echo(group_id)
    return status


def describe_cmd(bootstrap: str, group_id: str) -> int:
    status, view = _run("describe", bootstrap, lambda c: describe_group(c, group_id))
    if view is None:
        return status
    if view.state == "Dead" and not view.members and not view.partitions:
        click.echo(f"raftka groups describe: consumer group {group_id!r} does not exist", err=True)
        return 1
    epochs = (f"  GROUP-EPOCH {view.group_epoch}  ASSIGNMENT-EPOCH {view.assignment_epoch}"
              if view.group_epoch is not None else "")
    click.echo(f"GROUP {view.group_id}  STATE {view.state}  PROTOCOL {view.protocol or '-'}  "
               f"MEMBERS {len(view.members)}{epochs}{_coordinator(view)}")
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
    _table(rows)
    if view.group_epoch is not None:  # KIP-848: kafka-consumer-groups --members --verbose's columns
        click.echo("")
        # ... and what each member subscribes to: topic names, or its pattern (regex subscriptions
        # are resolved by the coordinator).
        # A group being migrated has classic members too: Kafka's UPGRADED column (true: the
        # member speaks the consumer protocol, false: a classic member) appears then, as there.
        mixed = any(m.classic for m in view.members)
        members_rows = [("CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
                         "TARGET-EPOCH", "TARGET-ASSIGNMENT", "SUBSCRIPTION") + (("UPGRADED",) if mixed else ())]
        for m in view.members:
            subscription = (f"regex:{m.subscribed_regex}" if m.subscribed_regex
                            else ",".join(sorted(m.subscribed_topics)) or "-")
            members_rows.append((m.member_id, m.host, m.client_id, str(len(m.assignment)), str(m.member_epoch),
                                 _partitions(m.assignment), str(view.assignment_epoch),
                                 _partitions(m.target_assignment), subscription)
                                + ((str(not m.classic).lower(),) if mixed else ()))
        _table(members_rows)
    return status


def _coordinator(view: GroupView) -> str:
    """`  COORDINATOR host:port (id)`: kafka-consumer-groups --state's COORDINATOR (ID)."""
    broker = view.coordinator
    return "" if broker is None else f"  COORDINATOR {broker.host}:{broker.port} ({broker.node_id})"


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


def _partitions(tps) -> str:
    """Kafka's `topic:0,1;other:2` (`-` for none)."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"


def delete_cmd(bootstrap: str, group_id: str) -> int:
    status, _ = _run("delete", bootstrap, lambda c: delete_group(c, group_id))
    if status == 0:
        click.echo(f"Deleted consumer group {group_id!r}.")
    return status


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


async def plan_offsets(cluster: Cluster, topics: tuple[str, ...], all_topics: bool, scenario: ResetScenario,
                       current: dict[TopicPartition, int], none_yet: str) -> dict[TopicPartition, int]:
    """--reset-offsets' new offset for each partition of `topics` (TOPIC or TOPIC:P,P) or, with
    `all_topics`, of every topic in `current` (Refused with `none_yet` when it is empty)."""
    if all_topics:
        names = sorted({tp.topic for tp in current})
        if not names:
            raise Refused(none_yet)
    else:
        names = [spec.partition(":")[0] for spec in topics]
    known = {}
    for name in dict.fromkeys(names):
        try:
            known[name] = await cluster.wait_for_partitions(name, TIMEOUT_MS / 1000)
        except UnknownTopicOrPartitionError:
            raise Refused(f"topic {name!r} does not exist") from None
    tps: list[TopicPartition] = []
    for spec in (names if all_topics else topics):
        try:
            found = parse_topic_partitions(spec, known)
        except ValueError as exc:  # a partition the topic does not have: the cluster's answer
            raise Refused(str(exc)) from None
        tps.extend(tp for tp in found if tp not in tps)
    earliest = await list_offsets(cluster, dict.fromkeys(tps, EARLIEST), timeout=TIMEOUT_MS / 1000)
    latest = await list_offsets(cluster, dict.fromkeys(tps, LATEST), timeout=TIMEOUT_MS / 1000)
    by_time = None
    if scenario.kind == "datetime":
        by_time = await list_offsets(cluster, dict.fromkeys(tps, scenario.value), timeout=TIMEOUT_MS / 1000)
    return plan_reset(scenario, tps, current, earliest, latest, by_time)


def reset_offsets_cmd(bootstrap: str, group_id: str, topics: tuple[str, ...], all_topics: bool,
                      scenario: ResetScenario, execute: bool) -> int:
    """kafka-consumer-groups --reset-offsets: print the plan (GROUP TOPIC PARTITION NEW-OFFSET)
    and, with --execute, commit it. Refused while the group has members, as Kafka does."""

    async def action(cluster: Cluster) -> dict[TopicPartition, int]:
        view = await describe_group(cluster, group_id)
        if view.state not in ("Empty", "Dead"):
            raise Refused(f"assignments can only be reset if the group {group_id!r} is inactive, "
                           f"but the current state is {view.state}")
        committed = {p.tp: p.committed for p in view.partitions if p.committed is not None}
        plan = await plan_offsets(cluster, topics, all_topics, scenario, committed,
                                  f"group {group_id!r} has no committed offsets; name the topics with --topic")
        if execute:
            membership = GroupMembership(cluster, group_id, request_timeout_ms=TIMEOUT_MS)
            await membership.commit({tp: OffsetAndMetadata(o) for tp, o in plan.items()},
                                    as_member=False)
        return plan

    status, plan = _run("reset-offsets", bootstrap, action)
    if plan is None:
        return status
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(group_id, tp.topic, str(tp.partition), str(o)) for tp, o in sorted(plan.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    if not execute:
        click.echo("(dry run: nothing was changed; add --execute to commit these offsets)", err=True)
    return 0

