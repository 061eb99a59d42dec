"""`raftka configs describe|alter`: kafka-configs.sh over IncrementalAlterConfigs / DescribeConfigs.

    raftka configs describe --entity-type topics --entity-name orders
    raftka configs alter --entity-type topics --entity-name orders --add-config retention.ms=60000,cleanup.policy=[compact,delete]
    raftka configs alter --entity-type brokers --entity-default --add-config log.retention.ms=86400000
    raftka configs alter --entity-type brokers --entity-name 1 --delete-config unclean.leader.election.enable
    raftka configs alter --entity-type groups --entity-name jobs --add-config share.auto.offset.reset=earliest

Exit status: 0 done, 1 the cluster said no (or could not be reached), 2 bad arguments.
"""

from __future__ import annotations

import click

from raftka.cli.runner import USAGE, fail, run_with_admin
from raftka.client.admin import AsyncAdmin

ENTITY_TYPES = ("topics", "brokers", "groups")


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' `--add-config k1=v1,k2=[v2,v3]`: commas split entries except inside [ ]
    (a list value, stored with plain commas). ValueError names the malformed entry."""
    entries: list[str] = []
    depth, current = 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"--add-config {text!r}: a ']' without its '['")
        if ch == "," and depth == 0:
            entries.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise ValueError(f"--add-config {text!r}: a '[' without its ']'")
    entries.append("".join(current))
    out: dict[str, str] = {}
    for entry in entries:
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config entry {entry!r} is not key=value (e.g. retention.ms=60000)")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def parse_delete_config(values: tuple[str, ...]) -> list[str]:
    return [k.strip() for v in values for k in v.split(",") if k.strip()]


def _target(entity_type: str, name: str | None, default: bool) -> dict:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"--entity-type {entity_type!r}; expected one of {', '.join(ENTITY_TYPES)}")
    if entity_type == "topics":
        if default or not name:
            raise ValueError("--entity-type topics needs --entity-name TOPIC")
        return {"topic": name}
    if entity_type == "groups":
        if default or not name:
            raise ValueError("--entity-type groups needs --entity-name GROUP")
        return {"group": name}
    if default == bool(name):
        raise ValueError("--entity-type brokers needs exactly one of --entity-name BROKER_ID or --entity-default")
    if default:
        return {"broker_default": True}
    if not name.isdigit():
        raise ValueError(f"--entity-name {name!r}: a broker id is a non-negative integer")
    return {"broker_id": int(name)}


def _what(entity_type: str, name: str | None, default: bool) -> str:
    if entity_type in ("topics", "groups"):
        return f"{entity_type[:-1]} {name}"
    return "the brokers' cluster-wide default" if default else f"broker {name}"


def describe(bootstrap: str, entity_type: str, name: str | None, default: bool, show_all: bool) -> int:
    try:
        target = _target(entity_type, name, default)
    except ValueError as exc:
        return fail("configs describe", str(exc), USAGE)

    async def action(admin: AsyncAdmin):
        return await admin.describe_configs(**target)

    status, configs = run_with_admin("configs describe", bootstrap, action)
    if status:
        return status
    shown = [c for c in (configs or {}).values() if show_all or c.is_dynamic]
    click.echo(f"{'All' if show_all else 'Dynamic'} configs for {_what(entity_type, name, default)} are:")
    for entry in sorted(shown, key=lambda c: c.name):
        value = "<sensitive>" if entry.is_sensitive else entry.value
        click.echo(f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} "
                   f"source={_SOURCES.get(entry.source, 'UNKNOWN')}")
    return 0


_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 8: "GROUP_CONFIG"}


def alter(bootstrap: str, entity_type: str, name: str | None, default: bool, add: str | None,
          delete: tuple[str, ...]) -> int:
    try:
        target = _target(entity_type, name, default)
        to_set = parse_add_config(add or "")
        to_delete = parse_delete_config(delete)
        if not to_set and not to_delete:
            raise ValueError("nothing to change: give --add-config k=v[,k=v] and/or --delete-config k[,k]")
        both = sorted(set(to_set) & set(to_delete))
        if both:
            raise ValueError(f"{both[0]!r} is both added and deleted")
    except ValueError as exc:
        return fail("configs alter", str(exc), USAGE)

    async def action(admin: AsyncAdmin) -> None:
        await admin.alter_configs(**target, set_configs=to_set, delete=to_delete)

    status, _ = run_with_admin("configs alter", bootstrap, action)
    if status == 0:
        click.echo(f"Completed updating config for {_what(entity_type, name, default)}.")
    return status
