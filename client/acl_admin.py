"""ACL administration over a Cluster: CreateAcls, DescribeAcls, DeleteAcls (Kafka keys 30, 29,
31), like kafka-acls.sh. Used by `raftka acls`. Values are Kafka's enum codes (ResourceType,
PatternType, AclOperation, AclPermissionType; docs/security.md); the broker answers
SecurityDisabled when it runs without an authorizer."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import error_for_code
from raftka.client.protocol import ApiKey, request_class

CreateAclsRequest = request_class(ApiKey.CREATE_ACLS)
DescribeAclsRequest = request_class(ApiKey.DESCRIBE_ACLS)
DeleteAclsRequest = request_class(ApiKey.DELETE_ACLS)


@dataclass(frozen=True)
class Acl:
    """One ACL (a binding): resource type/name/pattern type, principal, host, operation, permission."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class AclFilter:
    """ANY (1) / MATCH (2) enums and None strings match anything."""

    resource_type: int = 1
    resource_name: str | None = None
    pattern_type: int = 1
    principal: str | None = None
    host: str | None = None
    operation: int = 1
    permission_type: int = 1

    def fields(self, suffix: str = "_filter") -> dict:
        return {f"resource_type{suffix}": self.resource_type, f"resource_name{suffix}": self.resource_name,
                f"pattern_type{suffix}": self.pattern_type, f"principal{suffix}": self.principal,
                f"host{suffix}": self.host, "operation": self.operation, "permission_type": self.permission_type}


async def create_acls(cluster: Cluster, acls: Iterable[Acl]) -> None:
    """Create ACLs (one request); the first refusal is raised as its KafkaError."""
    acls = list(acls)
    response = await cluster.send_any(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[
        {"resource_type": a.resource_type, "resource_name": a.resource_name, "resource_pattern_type": a.pattern_type,
         "principal": a.principal, "host": a.host, "operation": a.operation, "permission_type": a.permission_type}
        for a in acls]))
    for acl, result in zip(acls, response.results, strict=True):
        if result.error_code:
            raise error_for_code(result.error_code, f"CreateAcls {acl}: {result.error_message or ''}".rstrip(": "))


async def describe_acls(cluster: Cluster, acl_filter: AclFilter = AclFilter()) -> list[Acl]:
    """The ACLs the filter selects."""
    response = await cluster.send_any(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(**acl_filter.fields()))
    if response.error_code:
        raise error_for_code(response.error_code, f"DescribeAcls: {response.error_message or ''}".rstrip(": "))
    return [Acl(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                a.permission_type) for r in response.resources for a in r.acls]


async def delete_acls(cluster: Cluster, filters: Iterable[AclFilter]) -> list[Acl]:
    """Delete every ACL some filter selects; the ACLs deleted."""
    response = await cluster.send_any(ApiKey.DELETE_ACLS, DeleteAclsRequest(
        filters=[f.fields() for f in filters]))
    deleted = []
    for result in response.filter_results:
        if result.error_code:
            raise error_for_code(result.error_code, f"DeleteAcls: {result.error_message or ''}".rstrip(": "))
        deleted.extend(Acl(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                           m.permission_type) for m in result.matching_acls)
    return deleted
