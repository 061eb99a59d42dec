"""The StandardAuthorizer's decision, as a pure function of the image's ACLs (Kafka's
`org.apache.kafka.metadata.authorizer.StandardAuthorizer`, which also lives with the metadata).

`authorize(acls, principal, host, operation, resource_type, name)`, step by step
(docs/security.md "ACLs"):

1. a principal listed in `super.users` is allowed everything;
2. the candidate ACLs are those of the resource's type whose pattern covers the name (LITERAL
   equal, LITERAL `*`, or PREFIXED prefix), whose principal is the caller's or `User:*`, and
   whose host is the caller's address or `*`;
3. a DENY for the operation or ALL denies (a DENY is never implied: DENY READ leaves DESCRIBE);
4. an ALLOW for the operation, ALL, or an operation that implies it allows: READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
5. otherwise denied, except when the resource has no ACL at all (for anyone): then
   `allow.everyone.if.no.acl.found` decides.

The host is compared as Java's `InetAddress.getHostAddress()` prints it (`java_host_address`).
No authorizer configured (`authorizer.class.name` empty) means no checks at all: callers get
None from `build_authorizer` and skip them.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raftka.raft_meta.security.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
# operation asked -> the ALLOWed operations that grant it (besides itself and ALL)
_IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# The operations `authorized_operations` evaluates per resource type (Kafka's lists).
OPERATIONS_BY_TYPE: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                           AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


@functools.lru_cache(maxsize=4096)  # a handful of client addresses, asked on every check
def java_host_address(host: str) -> str:
    """`host` as Java's `getHostAddress()` prints it: IPv4 as is, IPv4-mapped IPv6 as IPv4,
    other IPv6 in full without `::` or leading zeros (`::1` -> `0:0:0:0:0:0:0:1`). A name
    that is not an IP address is returned unchanged."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))
    return str(address)


def parse_super_users(raw: str) -> frozenset[str]:
    """Kafka's `super.users`: `User:admin;User:CN=b1,OU=Eng` (`;`-separated, trimmed)."""
    return frozenset(u.strip() for u in raw.split(";") if u.strip())


@dataclass(frozen=True)
class _Index:
    """The ACLs of one image arranged for lookups: LITERAL and PREFIXED by (type, name), and the
    prefix lengths in use per type, so a name's candidate prefixes are a few dict lookups
    (one per distinct length) however many PREFIXED ACLs there are."""

    literal: dict[tuple[int, str], tuple[AclBinding, ...]]
    prefixed: dict[tuple[int, str], tuple[AclBinding, ...]]
    prefix_lengths: dict[int, tuple[int, ...]]
    by_type: dict[int, tuple[AclBinding, ...]]


def _index(acls: Iterable[AclBinding]) -> _Index:
    literal: dict[tuple[int, str], list[AclBinding]] = {}
    prefixed: dict[tuple[int, str], list[AclBinding]] = {}
    lengths: dict[int, set[int]] = {}
    by_type: dict[int, list[AclBinding]] = {}
    for b in acls:
        by_type.setdefault(b.resource_type, []).append(b)
        if b.pattern_type == PatternType.LITERAL:
            literal.setdefault((b.resource_type, b.resource_name), []).append(b)
        elif b.pattern_type == PatternType.PREFIXED:
            prefixed.setdefault((b.resource_type, b.resource_name), []).append(b)
            lengths.setdefault(b.resource_type, set()).add(len(b.resource_name))
    return _Index({k: tuple(v) for k, v in literal.items()}, {k: tuple(v) for k, v in prefixed.items()},
                  {k: tuple(sorted(v)) for k, v in lengths.items()}, {k: tuple(v) for k, v in by_type.items()})


class StandardAuthorizer:
    """Decisions over an image's ACLs (`MetadataImage.acls`). The index of the last ACL map seen
    is kept: images share an unchanged map, so it is rebuilt only when an ACL changes."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: Mapping[str, AclBinding] | None = None
        self._index = _index(())

    def _indexed(self, acls: Mapping[str, AclBinding]) -> _Index:
        if acls is not self._acls:
            self._index = _index(acls.values())
            self._acls = acls
        return self._index

    def _resource_acls(self, index: _Index, resource_type: int, name: str) -> list[AclBinding]:
        found = list(index.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(index.literal.get((resource_type, WILDCARD), ()))
        for length in index.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(index.prefixed.get((resource_type, name[:length]), ()))
        return found

    def authorize(self, acls: Mapping[str, AclBinding], principal: str, host: str, operation: int,
                  resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        candidates = self._resource_acls(self._indexed(acls), resource_type, name)
        if not candidates:
            return self.allow_everyone_if_no_acl_found
        host = java_host_address(host)
        allowed = False
        implied_by = _IMPLIED_BY.get(operation, frozenset())
        for b in candidates:
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
                continue
            if b.permission_type == _DENY:
                if b.operation in (operation, AclOperation.ALL):
                    return False
            elif b.operation in (operation, AclOperation.ALL) or b.operation in implied_by:
                allowed = True
        return allowed

    def authorized_operations(self, acls: Mapping[str, AclBinding], principal: str, host: str,
                              resource_type: int, name: str) -> set[AclOperation]:
        """The operations of the resource's type (OPERATIONS_BY_TYPE) the caller may perform."""
        return {op for op in OPERATIONS_BY_TYPE.get(resource_type, ())
                if self.authorize(acls, principal, host, op, resource_type, name)}

    def authorize_any(self, acls: Mapping[str, AclBinding], principal: str, host: str, operation: int,
                      resource_type: int) -> bool:
        """May the caller do `operation` on SOME resource of the type (Kafka's
        `authorizeByResourceType`, KIP-679: InitProducerId with WRITE on any topic)? True if an
        ALLOW (the operation or ALL) for the caller is not covered by a DENY for the caller."""
        if principal in self.super_users:
            return True
        index = self._indexed(acls)
        of_type = index.by_type.get(resource_type, ())
        if not of_type:
            return self.allow_everyone_if_no_acl_found
        host = java_host_address(host)

        def mine(b: AclBinding, permission: int) -> bool:
            return (b.permission_type == permission and b.operation in (operation, AclOperation.ALL)
                    and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD))

        denies = [b for b in of_type if mine(b, _DENY)]
        if any(b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD for b in denies):
            return False
        denied_prefixes = [b.resource_name for b in denies if b.pattern_type == PatternType.PREFIXED]
        denied_literals = {b.resource_name for b in denies if b.pattern_type == PatternType.LITERAL}
        for b in of_type:
            if not mine(b, _ALLOW):
                continue
            if any(b.resource_name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if b.pattern_type == PatternType.LITERAL and b.resource_name in denied_literals:
                continue
            return True
        return False


def operations_bitfield(operations: Iterable[int]) -> int:
    """Kafka's `authorized_operations` i32: bit n set <=> operation code n allowed."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def build_authorizer(authorizer_class_name: str, super_users: Iterable[str],
                     allow_everyone_if_no_acl_found: bool) -> StandardAuthorizer | None:
    """The configured authorizer, or None when `authorizer.class.name` is empty (no checks)."""
    if not authorizer_class_name:
        return None
    if authorizer_class_name != STANDARD_AUTHORIZER:
        raise ValueError(f"authorizer.class.name {authorizer_class_name!r} is not supported; "
                         f"expected {STANDARD_AUTHORIZER!r} or empty")
    return StandardAuthorizer(super_users, allow_everyone_if_no_acl_found)
