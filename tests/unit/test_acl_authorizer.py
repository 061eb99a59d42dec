"""The StandardAuthorizer's decisions (raft_meta/security/authorizer.py) as tables: each row is the ACLs
in force, who asks what about which resource, and the expected answer."""

from __future__ import annotations

import pytest

from raftka.raft_meta.security.acls import AclBinding
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import AclPermissionType as Perm
from raftka.raft_meta.security.acls import PatternType as Pat
from raftka.raft_meta.security.acls import ResourceType as Res
from raftka.raft_meta.security.authorizer import (
    STANDARD_AUTHORIZER,
    StandardAuthorizer,
    build_authorizer,
    java_host_address,
    operations_bitfield,
    parse_super_users,
)

ALICE, BOB = "User:alice", "User:bob"
IP, OTHER_IP = "10.0.0.1", "10.0.0.2"


def acl(res: Res, name: str, op: Op, perm: Perm = Perm.ALLOW, principal: str = ALICE, host: str = "*",
        pattern: Pat = Pat.LITERAL) -> AclBinding:
    return AclBinding(res, name, pattern, principal, host, op, perm)


def acls(*bindings: AclBinding) -> dict[str, AclBinding]:
    return {f"id{i}": b for i, b in enumerate(bindings)}


T = Res.TOPIC
# (case, ACLs, principal, host, operation, resource type, name, expected)
CASES = [
    ("no ACL, default denies", [], ALICE, IP, Op.READ, T, "orders", False),
    ("literal allow", [acl(T, "orders", Op.READ)], ALICE, IP, Op.READ, T, "orders", True),
    ("literal allow is not another topic", [acl(T, "orders", Op.READ)], ALICE, IP, Op.READ, T, "orders2", False),
    ("another principal", [acl(T, "orders", Op.READ)], BOB, IP, Op.READ, T, "orders", False),
    ("User:* matches everyone", [acl(T, "orders", Op.READ, principal="User:*")], BOB, IP, Op.READ, T, "orders", True),
    ("wildcard resource", [acl(T, "*", Op.WRITE)], ALICE, IP, Op.WRITE, T, "anything", True),
    ("wildcard resource of another type", [acl(Res.GROUP, "*", Op.READ)], ALICE, IP, Op.READ, T, "x", False),
    ("prefixed covers", [acl(T, "ord", Op.READ, pattern=Pat.PREFIXED)], ALICE, IP, Op.READ, T, "orders", True),
    ("prefixed does not cover", [acl(T, "ord", Op.READ, pattern=Pat.PREFIXED)], ALICE, IP, Op.READ, T, "pay", False),
    ("prefix longer than the name", [acl(T, "orders-x", Op.READ, pattern=Pat.PREFIXED)], ALICE, IP, Op.READ, T,
     "orders", False),
    ("several prefix lengths", [acl(T, "o", Op.READ, pattern=Pat.PREFIXED),
                                acl(T, "orde", Op.READ, Perm.DENY, pattern=Pat.PREFIXED),
                                acl(T, "ordersz", Op.READ, Perm.DENY, pattern=Pat.PREFIXED)],
     ALICE, IP, Op.READ, T, "orders", False),
    ("the whole name as a prefix", [acl(T, "orders", Op.READ, pattern=Pat.PREFIXED)], ALICE, IP, Op.READ, T,
     "orders", True),
    ("literal * is not a prefix", [acl(T, "ord*", Op.READ)], ALICE, IP, Op.READ, T, "orders", False),
    ("other operation", [acl(T, "orders", Op.WRITE)], ALICE, IP, Op.READ, T, "orders", False),
    ("ALL grants every operation", [acl(T, "orders", Op.ALL)], ALICE, IP, Op.DELETE, T, "orders", True),
    ("READ implies DESCRIBE", [acl(T, "orders", Op.READ)], ALICE, IP, Op.DESCRIBE, T, "orders", True),
    ("WRITE implies DESCRIBE", [acl(T, "orders", Op.WRITE)], ALICE, IP, Op.DESCRIBE, T, "orders", True),
    ("DELETE implies DESCRIBE", [acl(T, "orders", Op.DELETE)], ALICE, IP, Op.DESCRIBE, T, "orders", True),
    ("ALTER implies DESCRIBE", [acl(T, "orders", Op.ALTER)], ALICE, IP, Op.DESCRIBE, T, "orders", True),
    ("CREATE does not imply DESCRIBE", [acl(T, "orders", Op.CREATE)], ALICE, IP, Op.DESCRIBE, T, "orders", False),
    ("DESCRIBE does not imply READ", [acl(T, "orders", Op.DESCRIBE)], ALICE, IP, Op.READ, T, "orders", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl(T, "orders", Op.ALTER_CONFIGS)], ALICE, IP,
     Op.DESCRIBE_CONFIGS, T, "orders", True),
    ("DESCRIBE_CONFIGS does not imply ALTER_CONFIGS", [acl(T, "orders", Op.DESCRIBE_CONFIGS)], ALICE, IP,
     Op.ALTER_CONFIGS, T, "orders", False),
    ("DENY wins over ALLOW", [acl(T, "orders", Op.READ), acl(T, "orders", Op.READ, Perm.DENY)], ALICE, IP,
     Op.READ, T, "orders", False),
    ("DENY on a prefix wins over a literal ALLOW", [acl(T, "orders", Op.READ),
                                                    acl(T, "or", Op.READ, Perm.DENY, pattern=Pat.PREFIXED)],
     ALICE, IP, Op.READ, T, "orders", False),
    ("DENY ALL wins", [acl(T, "*", Op.ALL, Perm.DENY, principal="User:*"), acl(T, "orders", Op.READ)], ALICE, IP,
     Op.READ, T, "orders", False),
    ("DENY is not implied: DENY READ leaves DESCRIBE", [acl(T, "orders", Op.ALL), acl(T, "orders", Op.READ, Perm.DENY)],
     ALICE, IP, Op.DESCRIBE, T, "orders", True),
    ("DENY for another principal", [acl(T, "orders", Op.READ), acl(T, "orders", Op.READ, Perm.DENY, principal=BOB)],
     ALICE, IP, Op.READ, T, "orders", True),
    ("host matches", [acl(T, "orders", Op.READ, host=IP)], ALICE, IP, Op.READ, T, "orders", True),
    ("host differs", [acl(T, "orders", Op.READ, host=IP)], ALICE, OTHER_IP, Op.READ, T, "orders", False),
    ("DENY from one host only", [acl(T, "orders", Op.READ), acl(T, "orders", Op.READ, Perm.DENY, host=OTHER_IP)],
     ALICE, IP, Op.READ, T, "orders", True),
    ("IPv6 in Java's form", [acl(T, "orders", Op.READ, host="0:0:0:0:0:0:0:1")], ALICE, "::1", Op.READ, T,
     "orders", True),
    ("an ACL for someone else still makes the resource guarded", [acl(T, "orders", Op.READ, principal=BOB)],
     ALICE, IP, Op.READ, T, "orders", False),
    ("group READ", [acl(Res.GROUP, "g", Op.READ)], ALICE, IP, Op.READ, Res.GROUP, "g", True),
    ("group READ implies DESCRIBE", [acl(Res.GROUP, "g", Op.READ)], ALICE, IP, Op.DESCRIBE, Res.GROUP, "g", True),
    ("cluster CLUSTER_ACTION", [acl(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)], ALICE, IP, Op.CLUSTER_ACTION,
     Res.CLUSTER, "kafka-cluster", True),
    ("transactional id WRITE", [acl(Res.TRANSACTIONAL_ID, "tx-", Op.WRITE, pattern=Pat.PREFIXED)], ALICE, IP,
     Op.WRITE, Res.TRANSACTIONAL_ID, "tx-1", True),
]


@pytest.mark.parametrize("bindings, principal, host, op, res, name, expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_authorize(bindings, principal, host, op, res, name, expected) -> None:
    assert StandardAuthorizer().authorize(acls(*bindings), principal, host, op, res, name) is expected


@pytest.mark.parametrize("bindings, expected", [
    ([], True),  # no ACL on the resource at all
    ([acl(T, "orders", Op.READ, principal=BOB)], False),  # guarded by an ACL for someone else
    ([acl(T, "other", Op.READ, principal=BOB)], True),  # an ACL on another resource does not guard this one
    ([acl(T, "ord", Op.READ, Perm.DENY, principal=BOB, pattern=Pat.PREFIXED)], False),
], ids=["no acl", "acl for another principal", "acl on another topic", "prefixed deny for another"])
def test_allow_everyone_if_no_acl_found(bindings, expected) -> None:
    authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=True)
    assert authorizer.authorize(acls(*bindings), ALICE, IP, Op.READ, T, "orders") is expected


def test_super_users_bypass_deny() -> None:
    authorizer = StandardAuthorizer(parse_super_users(" User:admin ; User:CN=b1,OU=Eng;"))
    denied = acls(acl(T, "*", Op.ALL, Perm.DENY, principal="User:*"))
    assert authorizer.authorize(denied, "User:admin", IP, Op.DELETE, T, "orders")
    assert authorizer.authorize(denied, "User:CN=b1,OU=Eng", IP, Op.CLUSTER_ACTION, Res.CLUSTER, "kafka-cluster")
    assert not authorizer.authorize(denied, ALICE, IP, Op.READ, T, "orders")


# authorize_any (KIP-679: InitProducerId may use WRITE on any topic instead of IDEMPOTENT_WRITE)
ANY_CASES = [
    ("nothing", [], False),
    ("literal write", [acl(T, "orders", Op.WRITE)], True),
    ("prefixed write", [acl(T, "o", Op.WRITE, pattern=Pat.PREFIXED)], True),
    ("ALL", [acl(T, "orders", Op.ALL)], True),
    ("only read", [acl(T, "orders", Op.READ)], False),
    ("write denied everywhere", [acl(T, "orders", Op.WRITE), acl(T, "*", Op.WRITE, Perm.DENY)], False),
    ("write denied on the same literal", [acl(T, "orders", Op.WRITE), acl(T, "orders", Op.WRITE, Perm.DENY)], False),
    ("write denied by a covering prefix", [acl(T, "orders", Op.WRITE),
                                           acl(T, "or", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)], False),
    ("write denied elsewhere", [acl(T, "orders", Op.WRITE), acl(T, "pay", Op.WRITE, Perm.DENY)], True),
    ("someone else's write", [acl(T, "orders", Op.WRITE, principal=BOB)], False),
]


@pytest.mark.parametrize("bindings, expected", [c[1:] for c in ANY_CASES], ids=[c[0] for c in ANY_CASES])
def test_authorize_any(bindings, expected) -> None:
    assert StandardAuthorizer().authorize_any(acls(*bindings), ALICE, IP, Op.WRITE, T) is expected


def test_authorized_operations_and_bitfield() -> None:
    authorizer = StandardAuthorizer()
    ops = authorizer.authorized_operations(acls(acl(T, "orders", Op.READ)), ALICE, IP, T, "orders")
    assert ops == {Op.READ, Op.DESCRIBE}
    assert operations_bitfield(ops) == (1 << 3) | (1 << 8)
    everything = acls(acl(T, "*", Op.ALL))
    assert operations_bitfield(authorizer.authorized_operations(everything, ALICE, IP, T, "x")) == 3576
    cluster = acls(acl(Res.CLUSTER, "kafka-cluster", Op.ALL))
    assert operations_bitfield(authorizer.authorized_operations(cluster, ALICE, IP, Res.CLUSTER,
                                                                "kafka-cluster")) == 8096
    group = acls(acl(Res.GROUP, "*", Op.ALL))
    assert operations_bitfield(authorizer.authorized_operations(group, ALICE, IP, Res.GROUP, "g")) == 3400


def test_index_follows_the_acl_map() -> None:
    authorizer = StandardAuthorizer()
    first = acls(acl(T, "orders", Op.READ))
    assert authorizer.authorize(first, ALICE, IP, Op.READ, T, "orders")
    second = dict(first)
    second["more"] = acl(T, "orders", Op.READ, Perm.DENY)
    assert not authorizer.authorize(second, ALICE, IP, Op.READ, T, "orders")
    assert authorizer.authorize(first, ALICE, IP, Op.READ, T, "orders")


@pytest.mark.parametrize("host, expected", [
    ("10.1.2.3", "10.1.2.3"), ("::1", "0:0:0:0:0:0:0:1"), ("::ffff:10.1.2.3", "10.1.2.3"),
    ("2001:db8::0042", "2001:db8:0:0:0:0:0:42"), ("broker.example", "broker.example"),
])
def test_java_host_address(host: str, expected: str) -> None:
    assert java_host_address(host) == expected


def test_build_authorizer() -> None:
    assert build_authorizer("", (), False) is None
    assert isinstance(build_authorizer(STANDARD_AUTHORIZER, ("User:a",), True), StandardAuthorizer)
    with pytest.raises(ValueError, match="kafka.security.authorizer.AclAuthorizer"):
        build_authorizer("kafka.security.authorizer.AclAuthorizer", (), False)
