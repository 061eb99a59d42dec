"""`raftka topics ...`: kafka-topics.sh's verbs over the SDK's AsyncAdmin.

Each function returns the process exit status (cli/runner.py: 0 done, 1 the cluster said no
or could not be reached, 2 bad arguments). Errors go to stderr naming the topic and the
broker's reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from raftka.cli.runner import USAGE, fail, run_with_admin
from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.errors import TopicAlreadyExistsError


def parse_configs(pairs: Sequence[str]) -> dict[str, str]:
    """`k=v` strings as a dict; ValueError names the malformed entry."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config {pair!r} is not key=value (e.g. retention.ms=60000)")
        out[key.strip()] = value.strip()
    return out


def create(bootstrap: str, topic: str, partitions: int | None, replication_factor: int | None,
           configs: Sequence[str], if_not_exists: bool) -> int:
    try:
        config_map = parse_configs(configs)
    except ValueError as exc:
        return fail("topics create", str(exc), USAGE)
    new = NewTopic(topic, -1 if partitions is None else partitions,
                   -1 if replication_factor is None else replication_factor, config_map)

    async def action(admin: AsyncAdmin) -> None:
        try:
            await admin.create_topics([new])
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise

    status, _ = run_with_admin("topics create", bootstrap, action)
    if status == 0:
        click.echo(f"Created topic {topic}.")
    return status


def list_topics(bootstrap: str) -> int:
    status, names = run_with_admin("topics list", bootstrap, lambda a: a.list_topics())
    for name in names or []:
        click.echo(name)
    return status


def describe(bootstrap: str, topic: str | None) -> int:
    async def action(admin: AsyncAdmin):
        described = await admin.describe_topics(None if topic is None else [topic])
        configs = {}
        for t in described:  # the topic's own configs, as kafka-topics prints them
            entries = await admin.describe_configs(topic=t.name)
            configs[t.name] = ",".join(f"{c.name}={c.value}" for c in sorted(entries.values(), key=lambda c: c.name)
                                       if c.source == 1)
        return described, configs

    status, result = run_with_admin("topics describe", bootstrap, action)
    topics, configs = result if result is not None else ([], {})
    for t in topics:
        leaders_ok = sum(1 for p in t.partitions if p.leader >= 0)
        click.echo(f"Topic: {t.name}\tPartitionCount: {len(t.partitions)}\t"
                   f"ReplicationFactor: {len(t.partitions[0].replicas) if t.partitions else 0}"
                   f"\tLeaders: {leaders_ok}/{len(t.partitions)}\tConfigs: {configs.get(t.name, '')}")
        for p in t.partitions:
            click.echo(f"\tTopic: {t.name}\tPartition: {p.partition}\t"
                       f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
                       f"LeaderEpoch: {p.leader_epoch}\t"
                       f"Replicas: {','.join(map(str, p.replicas))}\t"
                       f"Isr: {','.join(map(str, p.isr))}"
                       + (f"\tOffline: {','.join(map(str, p.offline_replicas))}" if p.offline_replicas else ""))
    return status


def delete(bootstrap: str, topic: str) -> int:
    status, _ = run_with_admin("topics delete", bootstrap, lambda a: a.delete_topics([topic]))
    if status == 0:
        click.echo(f"Deleted topic {topic}.")
    return status


def alter(bootstrap: str, topic: str, partitions: int | None) -> int:
    if partitions is None:
        return fail("topics alter", "nothing to change: give --partitions N", USAGE)

    async def action(admin: AsyncAdmin) -> None:
        await admin.describe_topics([topic])  # a clear "unknown topic" first
        await admin.create_partitions({topic: partitions})

    status, _ = run_with_admin("topics alter", bootstrap, action)
    if status == 0:
        click.echo(f"Topic {topic} now has {partitions} partitions.")
    return status
