"""`raftka acls` options -> the ACLs and filters sent, as kafka-acls.sh builds them."""

from __future__ import annotations

import pytest

from raftka.cli.acls import (
    AclOptions,
    UsageError,
    acls_to_add,
    filters_to_list,
    filters_to_remove,
    format_acls,
    parse_operation,
)
from raftka.client.acl_admin import Acl, AclFilter
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import AclPermissionType as Perm
from raftka.raft_meta.security.acls import PatternType as Pat
from raftka.raft_meta.security.acls import ResourceType as Res


@pytest.mark.parametrize("text, op", [("Read", Op.READ), ("IdempotentWrite", Op.IDEMPOTENT_WRITE),
                                      ("DESCRIBE_CONFIGS", Op.DESCRIBE_CONFIGS), ("all", Op.ALL),
                                      ("cluster-action", Op.CLUSTER_ACTION)])
def test_operation_spellings(text: str, op: Op) -> None:
    assert parse_operation(text) == op


ADD = [
    ("defaults: All, host *", AclOptions(allow_principals=["User:a"], topics=["t"]),
     [Acl(Res.TOPIC, "t", Pat.LITERAL, "User:a", "*", Op.ALL, Perm.ALLOW)]),
    ("principal x host x op", AclOptions(deny_principals=["User:a", "User:b"], deny_hosts=["10.0.0.1"],
                                         operations=["Write"], cluster=True),
     [Acl(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, p, "10.0.0.1", Op.WRITE, Perm.DENY)
      for p in ("User:a", "User:b")]),
    ("prefixed", AclOptions(allow_principals=["User:a"], transactional_ids=["tx-"], operations=["Write"],
                            resource_pattern_type="PREFIXED"),
     [Acl(Res.TRANSACTIONAL_ID, "tx-", Pat.PREFIXED, "User:a", "*", Op.WRITE, Perm.ALLOW)]),
    ("--producer", AclOptions(allow_principals=["User:a"], topics=["t"], producer=True),
     [Acl(Res.TOPIC, "t", Pat.LITERAL, "User:a", "*", op, Perm.ALLOW) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)]),
    ("--consumer", AclOptions(allow_principals=["User:a"], topics=["t"], groups=["g"], consumer=True),
     [Acl(Res.TOPIC, "t", Pat.LITERAL, "User:a", "*", op, Perm.ALLOW) for op in (Op.READ, Op.DESCRIBE)]
     + [Acl(Res.GROUP, "g", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)]),
]


@pytest.mark.parametrize("options, expected", [c[1:] for c in ADD], ids=[c[0] for c in ADD])
def test_add(options: AclOptions, expected: list) -> None:
    assert acls_to_add(options) == expected


@pytest.mark.parametrize("options, message", [
    (AclOptions(allow_principals=["User:a"]), "name at least one resource"),
    (AclOptions(topics=["t"]), "name at least one principal"),
    (AclOptions(allow_principals=["User:a"], topics=["t"], resource_pattern_type="match"), "expected one of literal"),
    (AclOptions(allow_principals=["User:a"], topics=["t"], consumer=True), "--consumer needs --group"),
    (AclOptions(allow_principals=["User:a"], topics=["t"], operations=["Reed"]), "unknown operation 'Reed'"),
])
def test_add_refusals(options: AclOptions, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        acls_to_add(options)


def test_list_and_remove_filters() -> None:
    assert filters_to_list(AclOptions()) == [AclFilter()]
    assert filters_to_list(AclOptions(topics=["t"], principals=["User:a"], resource_pattern_type="match")) == [
        AclFilter(Res.TOPIC, "t", Pat.MATCH, principal="User:a")]
    assert filters_to_remove(AclOptions(groups=["g"])) == [AclFilter(Res.GROUP, "g", Pat.LITERAL)]
    assert filters_to_remove(AclOptions(groups=["g"], allow_principals=["User:a"], operations=["Read"])) == [
        AclFilter(Res.GROUP, "g", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)]
    with pytest.raises(UsageError, match="name at least one resource"):
        filters_to_remove(AclOptions(allow_principals=["User:a"]))


def test_listing_format_is_kafka_acls() -> None:
    lines = format_acls([Acl(Res.TOPIC, "t", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)])
    assert lines == ["Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: ",
                     " \t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)", ""]
