"""The `authorized_operations` bit fields of Metadata, DescribeGroups and DescribeCluster.

Kafka answers a request that sets `include_*_authorized_operations` with a 32-bit field of
AclOperation codes: without an authorizer, every operation the resource type supports (its
`AclEntry.supportedOperations`); with one, those the authorizer allows the caller. This is the
one place that computes it; with `authorizer.class.name` set, the answer is the
StandardAuthorizer's (`broker/acl_checks.authorized_operations`).
A request that does not ask gets INT32_MIN ("omitted").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftka.broker.acl_checks import AuthorizationContext
    from raftka.broker.net.network import ConnectionInfo

OMITTED = -(2**31)

# Kafka's AclOperation codes.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

TOPIC, GROUP, CLUSTER = "topic", "group", "cluster"

# Kafka's AclEntry.supportedOperations per resource type.
SUPPORTED_OPERATIONS: dict[str, tuple[int, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
}


def to_bitfield(operations: Iterable[int]) -> int:
    """Kafka's Utils.to32BitField, as a signed int32."""
    value = 0
    for op in operations:
        if not 0 <= op < 32:
            raise ValueError(f"operation code {op}; expected 0..31")
        value |= 1 << op
    return value - (1 << 32) if value >= 1 << 31 else value


def authorized_operations(ctx: AuthorizationContext, conn: ConnectionInfo | None, resource_type: str,
                          resource_name: str, wanted: bool = True) -> int:
    """The bit field to answer for one resource (OMITTED when the request did not ask)."""
    if not wanted:
        return OMITTED
    if ctx.authorizer is not None:  # the StandardAuthorizer's answer (broker/acl_checks.py)
        from raftka.broker import acl_checks
        from raftka.raft_meta.security.acls import ResourceType

        kind = {TOPIC: ResourceType.TOPIC, GROUP: ResourceType.GROUP, CLUSTER: ResourceType.CLUSTER}[resource_type]
        return acl_checks.authorized_operations(ctx, conn, kind, resource_name or "kafka-cluster")
    return to_bitfield(SUPPORTED_OPERATIONS[resource_type])
