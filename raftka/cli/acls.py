"""`raftka acls add|list|remove`: kafka-acls.sh's options and output.

    raftka acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
    raftka acls add --allow-principal User:bob --producer --topic pay- --resource-pattern-type prefixed
    raftka acls list --topic orders
    raftka acls remove --allow-principal User:alice --operation Read --topic orders

As in kafka-acls: `--operation` defaults to All; principals given without hosts get host `*`;
`--producer` = WRITE, DESCRIBE, CREATE on the topics; `--consumer` = READ, DESCRIBE on the
topics and READ on the groups (it needs `--group`). `list` and `remove` take a pattern-type
filter (`any`, `match`, `literal` (default), `prefixed`); `remove` without principals removes
every ACL of the resources, `list` without resources lists every ACL.

Each returns the exit status (cli/runner.py): 0 done, 1 the cluster said no or was unreachable, 2 bad options.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import click

from raftka.cli.runner import USAGE, UsageError, fail, run_with_cluster
from raftka.client.acl_admin import Acl, AclFilter, create_acls, delete_acls, describe_acls
from raftka.client.cluster import Cluster
from raftka.raft_meta.security.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

T = TypeVar("T")


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    return run_with_cluster(f"acls {command}", bootstrap, action)


def parse_operation(text: str) -> AclOperation:
    """Kafka's spellings: `Read`, `IdempotentWrite`, `DESCRIBE_CONFIGS`, `all` (case-insensitive)."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for op in AclOperation:
        if op not in (AclOperation.UNKNOWN, AclOperation.ANY) and op.name.replace("_", "").lower() == wanted:
            return op
    names = ", ".join(op.name.title().replace("_", "") for op in AclOperation if op > AclOperation.ANY)
    raise UsageError(f"unknown operation {text!r}; expected one of {names}")


def parse_pattern_type(text: str, *, for_filter: bool) -> PatternType:
    allowed = ("ANY", "MATCH", "LITERAL", "PREFIXED") if for_filter else ("LITERAL", "PREFIXED")
    if text.upper() not in allowed:
        raise UsageError(f"resource pattern type {text!r}; expected one of {', '.join(a.lower() for a in allowed)}")
    return PatternType[text.upper()]


@dataclass(frozen=True)
class AclOptions:
    """kafka-acls' options, as given."""

    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[str] = ()
    topics: Sequence[str] = ()
    groups: Sequence[str] = ()
    cluster: bool = False
    transactional_ids: Sequence[str] = ()
    resource_pattern_type: str = "literal"
    producer: bool = False
    consumer: bool = False
    principals: Sequence[str] = ()  # list's --principal filter

    def resources(self) -> list[tuple[ResourceType, str]]:
        out = [(ResourceType.TOPIC, t) for t in self.topics] + [(ResourceType.GROUP, g) for g in self.groups]
        out += [(ResourceType.TRANSACTIONAL_ID, t) for t in self.transactional_ids]
        if self.cluster:
            out.append((ResourceType.CLUSTER, CLUSTER_NAME))
        return out

    def entries(self) -> list[tuple[str, str, AclPermissionType]]:
        """(principal, host, permission) for every principal x host given (host `*` by default)."""
        out = []
        for principals, hosts, permission in ((self.allow_principals, self.allow_hosts, AclPermissionType.ALLOW),
                                              (self.deny_principals, self.deny_hosts, AclPermissionType.DENY)):
            for principal in principals:
                out.extend((principal, host, permission) for host in (hosts or ("*",)))
        return out

    def operations_by_resource(self) -> list[tuple[ResourceType, str, list[AclOperation]]]:
        if self.producer or self.consumer:
            if self.operations:
                raise UsageError("--operation cannot be combined with --producer or --consumer")
            if not self.topics:
                raise UsageError("--producer and --consumer need --topic")
            if self.consumer and not self.groups:
                raise UsageError("--consumer needs --group")
            out = []
            for rt, name in self.resources():
                if rt == ResourceType.TOPIC:
                    ops = ([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE] if self.producer else [])
                    ops += [AclOperation.READ, AclOperation.DESCRIBE] if self.consumer else []
                    out.append((rt, name, list(dict.fromkeys(ops))))
                elif rt == ResourceType.GROUP and self.consumer:
                    out.append((rt, name, [AclOperation.READ]))
            return out
        ops = [parse_operation(o) for o in self.operations] or [AclOperation.ALL]
        return [(rt, name, ops) for rt, name in self.resources()]


def acls_to_add(options: AclOptions) -> list[Acl]:
    if not options.resources():
        raise UsageError("name at least one resource: --topic, --group, --cluster or --transactional-id")
    if not options.entries():
        raise UsageError("name at least one principal: --allow-principal or --deny-principal")
    pattern = parse_pattern_type(options.resource_pattern_type, for_filter=False)
    return [Acl(int(rt), name, int(pattern), principal, host, int(op), int(permission))
            for rt, name, ops in options.operations_by_resource()
            for principal, host, permission in options.entries()
            for op in ops]


def filters_to_remove(options: AclOptions) -> list[AclFilter]:
    if not options.resources():
        raise UsageError("name at least one resource: --topic, --group, --cluster or --transactional-id")
    pattern = int(parse_pattern_type(options.resource_pattern_type, for_filter=True))
    if not options.entries():  # every ACL of the resources
        return [AclFilter(int(rt), name, pattern) for rt, name in options.resources()]
    return [AclFilter(int(rt), name, pattern, principal, host, int(op), int(permission))
            for rt, name, ops in options.operations_by_resource()
            for principal, host, permission in options.entries()
            for op in ops]


def filters_to_list(options: AclOptions) -> list[AclFilter]:
    pattern = int(parse_pattern_type(options.resource_pattern_type, for_filter=True))
    principals: Sequence[str | None] = list(options.principals) or [None]
    resources = options.resources()
    if not resources:
        return [AclFilter(principal=p) for p in principals]
    return [AclFilter(int(rt), name, pattern, principal=p) for rt, name in resources for p in principals]


def format_acls(acls: Sequence[Acl]) -> list[str]:
    """kafka-acls' listing: one block per resource pattern."""
    lines = []
    by_resource: dict[tuple[int, str, int], list[Acl]] = {}
    for acl in acls:
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    for (rt, name, pt), entries in by_resource.items():
        lines.append(f"Current ACLs for resource `ResourcePattern(resourceType={ResourceType(rt).name}, "
                     f"name={name}, patternType={PatternType(pt).name})`: ")
        for a in entries:
            lines.append(f" \t(principal={a.principal}, host={a.host}, operation={AclOperation(a.operation).name}, "
                         f"permissionType={AclPermissionType(a.permission_type).name})")
        lines.append("")
    return lines


def add_cmd(bootstrap: str, options: AclOptions) -> int:
    try:
        acls = acls_to_add(options)
    except UsageError as exc:
        return fail("acls add", str(exc), USAGE)
    status, _ = _run("add", bootstrap, lambda c: create_acls(c, acls))
    if status == 0:
        click.echo(f"Adding ACLs for {len(acls)} binding(s):")
        for line in format_acls(acls):
            click.echo(line)
    return status


def list_cmd(bootstrap: str, options: AclOptions) -> int:
    try:
        filters = filters_to_list(options)
    except UsageError as exc:
        return fail("acls list", str(exc), USAGE)

    async def listing(cluster: Cluster) -> list[Acl]:
        found: dict[Acl, None] = {}
        for f in filters:
            found.update(dict.fromkeys(await describe_acls(cluster, f)))
        return list(found)

    status, acls = _run("list", bootstrap, listing)
    for line in format_acls(acls or []):
        click.echo(line)
    return status


def remove_cmd(bootstrap: str, options: AclOptions) -> int:
    try:
        filters = filters_to_remove(options)
    except UsageError as exc:
        return fail("acls remove", str(exc), USAGE)
    status, deleted = _run("remove", bootstrap, lambda c: delete_acls(c, filters))
    if status == 0:
        click.echo(f"Removed {len(deleted or [])} ACL(s):")
        for line in format_acls(deleted or []):
            click.echo(line)
    return status
