"""`raftka configs describe|alter --entity-type users|clients|ips`: kafka-configs' client
quotas, over DescribeClientQuotas / AlterClientQuotas.

    raftka configs alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576
    raftka configs alter --entity-type users --entity-name alice --client p1 --add-config consumer_byte_rate=2048
    raftka configs alter --entity-type clients --entity-default --add-config producer_byte_rate=1024
    raftka configs alter --entity-type ips --entity-name 10.0.0.1 --add-config connection_creation_rate=10
    raftka configs describe --entity-type users
    raftka configs alter --entity-type users --entity-name alice --delete-config producer_byte_rate

`--client NAME` / `--client-defaults` add the client-id part to a users entity (kafka-configs'
`--entity-type users --entity-name alice --entity-type clients --entity-name p1`). Exit
status: 0 done, 1 the cluster said no, 2 bad arguments.
"""

from __future__ import annotations

import click

from raftka.cli.runner import USAGE, fail, run_with_admin
from raftka.client.admin import AsyncAdmin, QuotaFilter

QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_SHOWN = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def quota_entity(entity_type: str, name: str | None, default: bool, client: str | None,
                 client_default: bool, *, describe: bool) -> dict[str, str | None]:
    """The entity as {type: name or None (default)}; a describe may leave a name out (any).
    ValueError names the bad combination."""
    kind = QUOTA_ENTITY_TYPES[entity_type]
    if name is not None and default:
        raise ValueError("give --entity-name or --entity-default, not both")
    if client is not None and client_default:
        raise ValueError("give --client or --client-defaults, not both")
    if (client is not None or client_default) and kind != "user":
        raise ValueError("--client / --client-defaults go with --entity-type users")
    if name is None and not default and not describe:
        raise ValueError(f"--entity-type {entity_type} needs --entity-name or --entity-default")
    entity: dict[str, str | None] = {kind: name}
    if client is not None or client_default:
        entity["client-id"] = client
    return entity


def _filters(entity: dict[str, str | None], default: bool, client_default: bool) -> list[QuotaFilter]:
    out = []
    for kind, name in entity.items():
        is_default = default if kind != "client-id" or "user" not in entity else client_default
        out.append(QuotaFilter(kind, name, default=name is None and is_default))
    return out


def _describe_entity(entity: dict[str, str | None]) -> str:
    parts = []
    for kind in ("user", "client-id", "ip"):
        if kind in entity:
            name = entity[kind]
            parts.append(f"the default {_SHOWN[kind]}" if name is None else f"{_SHOWN[kind]} '{name}'")
    return ", ".join(parts)


def describe_quotas(bootstrap: str, entity_type: str, name: str | None, default: bool, client: str | None,
                    client_default: bool) -> int:
    try:
        entity = quota_entity(entity_type, name, default, client, client_default, describe=True)
    except ValueError as exc:
        return fail("configs describe", str(exc), USAGE)
    filters = _filters(entity, default, client_default)

    async def action(admin: AsyncAdmin):
        return await admin.describe_client_quotas(filters, strict=True)

    status, found = run_with_admin("configs describe", bootstrap, action)
    if status:
        return status
    for described, values in sorted(found or [], key=lambda e: sorted((k, v or "") for k, v in e[0].items())):
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        click.echo(f"Quota configs for {_describe_entity(described)} are {shown}")
    return 0


def alter_quotas(bootstrap: str, entity_type: str, name: str | None, default: bool, client: str | None,
                 client_default: bool, to_set: dict[str, str], to_delete: list[str]) -> int:
    try:
        entity = quota_entity(entity_type, name, default, client, client_default, describe=False)
        values = {}
        for key, text in to_set.items():
            try:
                values[key] = float(text)
            except ValueError:
                raise ValueError(f"--add-config {key}={text!r}: a quota is a number") from None
    except ValueError as exc:
        return fail("configs alter", str(exc), USAGE)

    async def action(admin: AsyncAdmin) -> None:
        await admin.alter_client_quotas(entity, values, to_delete)

    status, _ = run_with_admin("configs alter", bootstrap, action)
    if status == 0:
        click.echo(f"Completed updating config for {_describe_entity(entity)}.")
    return status
