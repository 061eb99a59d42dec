"""ACLs as Kafka stores them (`AccessControlEntryRecord`), their filters, and the controller's decisions.

Pure: the enum values are Kafka's wire values (docs/security.md "ACLs"), so an `AclBinding` is
what CreateAcls carries, what the metadata record stores and what DescribeAcls returns.

- A stored ACL (`binding_error` is None) is LITERAL or PREFIXED, ALLOW or DENY, has a concrete
  resource type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER) and
  operation, a non-empty name (`kafka-cluster` for CLUSTER), a `Type:name` principal and a host.
- A filter (`AclFilter`) may use ANY for every enum, MATCH for the pattern type and None for
  the name, principal and host (= any). MATCH with a name selects the LITERAL ACLs of that
  name or `*` plus the PREFIXED ACLs that prefix it (Kafka's `ResourcePatternFilter`).
- `create_acls` / `delete_acls` are the controller's decisions: (image, request) -> records
  and per-item outcomes. Creating an exact duplicate succeeds and writes nothing (Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.records import AccessControlEntry, RemoveAccessControlEntry

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
# Bounds on what one ACL may hold (Kafka has none; ours keep the metadata log and the image
# small against a hostile CreateAcls). Names follow Kafka's topic-name limit spirit.
MAX_ACL_FIELD_CHARS = 1000
# The ACLs one CreateAcls asks for, or one DeleteAcls removes, travel between a broker and the
# controller in one control-RPC frame (1 MiB): their text is capped well below it. That is
# thousands of ordinary ACLs; over it the request is refused (POLICY_VIOLATION), nothing changes.
MAX_ACL_BYTES_PER_REQUEST = 512 * 1024


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum_value(enum: type[IntEnum], value: int) -> IntEnum | None:
    try:
        return enum(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not (permission) do what (operation) to which
    resources (type + name + pattern). Values are Kafka's enum codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def to_wire(self) -> list:
        return [self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type]

    @classmethod
    def from_wire(cls, item: Sequence) -> AclBinding:
        """From `to_wire`'s list (TypeError/ValueError if malformed)."""
        if not isinstance(item, (list, tuple)) or len(item) != 7:
            raise ValueError(f"an ACL is a list of 7 fields, not {item!r:.200}")
        rt, name, pt, principal, host, op, perm = item
        for value in (rt, pt, op, perm):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"ACL enum fields must be integers, not {value!r}")
        for value in (name, principal, host):
            if not isinstance(value, str):
                raise TypeError(f"ACL name, principal and host must be strings, not {value!r:.200}")
        return cls(rt, name, pt, principal, host, op, perm)

    @classmethod
    def from_record(cls, r: AccessControlEntry) -> AclBinding:
        return cls(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
                   r.permission_type)

    def describe(self) -> str:
        """Kafka's text form, for logs and errors."""
        return (f"(principal={self.principal}, host={self.host}, operation={_name(AclOperation, self.operation)}, "
                f"permissionType={_name(AclPermissionType, self.permission_type)}) on "
                f"{_name(ResourceType, self.resource_type)}:{_name(PatternType, self.pattern_type)}:"
                f"{self.resource_name}")


def _name(enum: type[IntEnum], value: int) -> str:
    member = _enum_value(enum, value)
    return member.name if member is not None else str(value)


def principal_error(principal: object) -> str | None:
    if not isinstance(principal, str) or ":" not in principal:
        return f"principal {principal!r:.200} is not of the form Type:name (e.g. User:alice)"
    kind, _, name = principal.partition(":")
    if not kind or not name:
        return f"principal {principal!r:.200} is not of the form Type:name (e.g. User:alice)"
    return None


def binding_error(b: AclBinding) -> str | None:
    """Why `b` cannot be stored (Kafka's INVALID_REQUEST reasons), else None."""
    rt = _enum_value(ResourceType, b.resource_type)
    if rt is None or rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"resource type {b.resource_type} is not a concrete resource type; expected 2..7"
    pt = _enum_value(PatternType, b.pattern_type)
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {b.pattern_type} is not LITERAL (3) or PREFIXED (4)"
    op = _enum_value(AclOperation, b.operation)
    if op is None or op in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"operation {b.operation} is not a concrete operation; expected 2..14"
    perm = _enum_value(AclPermissionType, b.permission_type)
    if perm not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"permission type {b.permission_type} is not DENY (2) or ALLOW (3)"
    if not b.resource_name:
        return "the resource name is empty"
    for what, value in (("resource name", b.resource_name), ("principal", b.principal), ("host", b.host)):
        if len(value) > MAX_ACL_FIELD_CHARS:
            return f"the {what} is {len(value)} characters; at most {MAX_ACL_FIELD_CHARS} allowed"
    if rt == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"the CLUSTER resource name is {b.resource_name!r}; it must be {CLUSTER_NAME!r}"
    problem = principal_error(b.principal)
    if problem is not None:
        return problem
    if not b.host:
        return "the host is empty; use * for any host"
    return None


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: ANY / MATCH enums and None strings match anything."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def to_wire(self) -> list:
        return [self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type]

    @classmethod
    def from_wire(cls, item: Sequence) -> AclFilter:
        if not isinstance(item, (list, tuple)) or len(item) != 7:
            raise ValueError(f"an ACL filter is a list of 7 fields, not {item!r:.200}")
        rt, name, pt, principal, host, op, perm = item
        for value in (rt, pt, op, perm):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"ACL filter enum fields must be integers, not {value!r}")
        for value in (name, principal, host):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"ACL filter name, principal and host must be strings or null, not {value!r:.200}")
        return cls(rt, name, pt, principal, host, op, perm)


def filter_error(f: AclFilter) -> str | None:
    """Why `f` is not a valid filter (UNKNOWN anywhere, or out of range), else None."""
    for what, enum, value in (("resource type", ResourceType, f.resource_type),
                              ("pattern type", PatternType, f.pattern_type),
                              ("operation", AclOperation, f.operation),
                              ("permission type", AclPermissionType, f.permission_type)):
        member = _enum_value(enum, value)
        if member is None or member == 0:
            return f"filter {what} {value} is unknown"
    return None


def _pattern_matches(f: AclFilter, b: AclBinding) -> bool:
    if f.pattern_type == PatternType.MATCH and f.resource_name is not None:
        if b.pattern_type == PatternType.LITERAL:
            return b.resource_name in (f.resource_name, WILDCARD)
        return b.pattern_type == PatternType.PREFIXED and f.resource_name.startswith(b.resource_name)
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH) and f.pattern_type != b.pattern_type:
        return False
    return f.resource_name is None or f.resource_name == b.resource_name


def filter_matches(f: AclFilter, b: AclBinding) -> bool:
    """True if the filter selects the stored ACL `b`."""
    if f.resource_type != ResourceType.ANY and f.resource_type != b.resource_type:
        return False
    if not _pattern_matches(f, b):
        return False
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != AclOperation.ANY and f.operation != b.operation:
        return False
    return f.permission_type == AclPermissionType.ANY or f.permission_type == b.permission_type


def matching(acls: Mapping[str, AclBinding], f: AclFilter) -> list[tuple[str, AclBinding]]:
    """(id, ACL) of every stored ACL the filter selects, in the image's order."""
    return [(acl_id, b) for acl_id, b in acls.items() if filter_matches(f, b)]


# --- the controller's decisions ------------------------------------------------------------

def check_request_size(acls: Iterable[AclBinding | AclFilter], what: str) -> None:
    """Raise POLICY_VIOLATION if the ACLs' text exceeds MAX_ACL_BYTES_PER_REQUEST."""
    size = sum(16 + len(a.resource_name or "") + len(a.principal or "") + len(a.host or "") for a in acls)
    if size > MAX_ACL_BYTES_PER_REQUEST:
        raise ControllerError(ErrorCode.POLICY_VIOLATION, f"{what} holds {size} bytes of ACLs; one request may hold at "
                                                          f"most {MAX_ACL_BYTES_PER_REQUEST}: split it")


@dataclass(frozen=True)
class AclOutcome:
    """One creation's or filter's outcome: `error` is (Kafka error name, message) or None;
    `deleted` the ACLs a deletion filter removed."""

    error: tuple[str, str] | None = None
    deleted: tuple[AclBinding, ...] = ()


def create_acls(acls: Mapping[str, AclBinding], bindings: Iterable[AclBinding],
                new_id: Callable[[int], str]) -> tuple[tuple[AccessControlEntry, ...], list[AclOutcome]]:
    """Records for the valid, new bindings (in order), and an outcome per binding. `new_id(i)`
    gives the id of the i-th binding (drawn only for the ones created)."""
    bindings = list(bindings)
    check_request_size(bindings, "this CreateAcls request")
    existing = set(acls.values())
    records: list[AccessControlEntry] = []
    outcomes: list[AclOutcome] = []
    for i, b in enumerate(bindings):
        problem = binding_error(b)
        if problem is not None:
            outcomes.append(AclOutcome(("INVALID_REQUEST", problem)))
            continue
        if b not in existing:
            existing.add(b)
            records.append(AccessControlEntry(new_id(i), b.resource_type, b.resource_name, b.pattern_type,
                                              b.principal, b.host, b.operation, b.permission_type))
        outcomes.append(AclOutcome())
    return tuple(records), outcomes


def delete_acls(acls: Mapping[str, AclBinding],
                filters: Iterable[AclFilter]) -> tuple[tuple[RemoveAccessControlEntry, ...], list[AclOutcome]]:
    """Records removing every ACL some filter selects (each once), and an outcome per filter
    listing what it removed (an ACL two filters select is listed under both, as in Kafka)."""
    removed: set[str] = set()
    records: list[RemoveAccessControlEntry] = []
    outcomes: list[AclOutcome] = []
    for f in filters:
        problem = filter_error(f)
        if problem is not None:
            outcomes.append(AclOutcome(("INVALID_REQUEST", problem)))
            continue
        found = matching(acls, f)
        for acl_id, _ in found:
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntry(acl_id))
        outcomes.append(AclOutcome(deleted=tuple(b for _, b in found)))
    check_request_size((b for o in outcomes for b in o.deleted), "the reply to this DeleteAcls request")
    return tuple(records), outcomes
