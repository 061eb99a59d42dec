"""ACLs in the metadata: the records, `apply`, snapshots, filters and the controller's decisions
(raft_meta/security/acls.py), as tables."""

from __future__ import annotations

import cbor2
import pytest

from raftka.raft_meta.metadata.apply import apply, replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    AccessControlEntry,
    RemoveAccessControlEntry,
    decode_record,
    encode_record,
)
from raftka.raft_meta.metadata.snapshot import (
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    image_digest,
    snapshot_delta,
)
from raftka.raft_meta.security.acls import (
    AclBinding,
    AclFilter,
    create_acls,
    delete_acls,
    filter_matches,
)
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import AclPermissionType as Perm
from raftka.raft_meta.security.acls import PatternType as Pat
from raftka.raft_meta.security.acls import ResourceType as Res

READ_ORDERS = AclBinding(Res.TOPIC, "orders", Pat.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)
DENY_PREFIX = AclBinding(Res.TOPIC, "ord", Pat.PREFIXED, "User:bob", "10.0.0.1", Op.WRITE, Perm.DENY)
GROUP_ALL = AclBinding(Res.GROUP, "*", Pat.LITERAL, "User:*", "*", Op.ALL, Perm.ALLOW)


def entry(acl_id: str, b: AclBinding) -> AccessControlEntry:
    return AccessControlEntry(acl_id, *b.to_wire())


def test_records_round_trip() -> None:
    for record in (entry("a", READ_ORDERS), RemoveAccessControlEntry("a")):
        assert decode_record(encode_record(record)) == record


def test_apply_adds_and_removes() -> None:
    image = replay([(1, entry("a", READ_ORDERS)), (2, entry("b", DENY_PREFIX))])
    assert image.acls == {"a": READ_ORDERS, "b": DENY_PREFIX}
    image, delta = apply(image, RemoveAccessControlEntry("a"), 3)
    assert delta.accepted and delta.acls
    assert image.acls == {"b": DENY_PREFIX}


BAD_RECORDS = [
    ("duplicate id", entry("a", DENY_PREFIX), "ACL id a already exists"),
    ("remove unknown", RemoveAccessControlEntry("zzz"), "ACL id 'zzz' does not exist"),
    ("ANY resource type", AccessControlEntry("c", Res.ANY, "x", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
     "resource type 1 is not a concrete resource type"),
    ("MATCH pattern", AccessControlEntry("c", Res.TOPIC, "x", Pat.MATCH, "User:a", "*", Op.READ, Perm.ALLOW),
     "pattern type 2 is not LITERAL (3) or PREFIXED (4)"),
    ("ANY operation", AccessControlEntry("c", Res.TOPIC, "x", Pat.LITERAL, "User:a", "*", Op.ANY, Perm.ALLOW),
     "operation 1 is not a concrete operation"),
    ("ANY permission", AccessControlEntry("c", Res.TOPIC, "x", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ANY),
     "permission type 1 is not DENY (2) or ALLOW (3)"),
    ("empty name", AccessControlEntry("c", Res.TOPIC, "", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
     "the resource name is empty"),
    ("cluster name", AccessControlEntry("c", Res.CLUSTER, "prod", Pat.LITERAL, "User:a", "*", Op.ALTER, Perm.ALLOW),
     "it must be 'kafka-cluster'"),
    ("principal", AccessControlEntry("c", Res.TOPIC, "x", Pat.LITERAL, "alice", "*", Op.READ, Perm.ALLOW),
     "principal 'alice' is not of the form Type:name"),
    ("enum not int", AccessControlEntry("c", "2", "x", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
     "is not an integer"),
]


@pytest.mark.parametrize("record, reason", [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS])
def test_apply_rejects_by_name(record, reason: str) -> None:
    image = replay([(1, entry("a", READ_ORDERS))])
    after, delta = apply(image, record, 2)
    assert not delta.accepted and reason in delta.reason
    assert after.acls == image.acls and after.offset == 2


def test_snapshot_keeps_acls_and_digest_sees_them() -> None:
    image = replay([(1, entry("a", READ_ORDERS)), (2, entry("b", DENY_PREFIX)), (3, entry("c", GROUP_ALL))])
    back = decode_snapshot(encode_snapshot(image))
    assert back == image and list(back.acls) == ["a", "b", "c"]
    assert image_digest(back) == image_digest(image)
    fewer, _ = apply(image, RemoveAccessControlEntry("b"), 4)
    assert image_digest(fewer) != image_digest(image)
    assert snapshot_delta(MetadataImage(), back).acls


def test_version_1_snapshot_loads_without_acls() -> None:
    body = cbor2.loads(encode_snapshot(MetadataImage(offset=5)))
    body["v"] = 1
    del body["acls"]
    assert decode_snapshot(cbor2.dumps(body)) == MetadataImage(offset=5)


@pytest.mark.parametrize("acls, message", [
    ([["a", 2, "t", 3, "User:a", "*", 3]], "acl: expected a list of 8 items"),
    ([["a", 2, "t", 3, "User:a", "*", 3, 9]], "acl a: permission type 9"),
    ([["a", 2, "t", 3, "User:a", "*", "3", 3]], "acl a: ACL enum fields must be integers"),
    ([["a", *READ_ORDERS.to_wire()], ["a", *DENY_PREFIX.to_wire()]], "acl a: listed twice"),
    (None, "acls: expected a list"),
])
def test_bad_snapshot_acls_are_refused(acls, message: str) -> None:
    body = cbor2.loads(encode_snapshot(MetadataImage()))
    body["acls"] = acls
    with pytest.raises(SnapshotError, match=message):
        decode_snapshot(cbor2.dumps(body))


# (filter, the stored ACLs it selects among READ_ORDERS, DENY_PREFIX, GROUP_ALL)
FILTERS = [
    ("any", AclFilter(), {READ_ORDERS, DENY_PREFIX, GROUP_ALL}),
    ("topics", AclFilter(resource_type=Res.TOPIC), {READ_ORDERS, DENY_PREFIX}),
    ("literal name", AclFilter(resource_name="orders"), {READ_ORDERS}),
    ("any pattern, exact name", AclFilter(resource_name="ord"), {DENY_PREFIX}),
    ("prefixed only", AclFilter(pattern_type=Pat.PREFIXED), {DENY_PREFIX}),
    ("match name", AclFilter(resource_type=Res.TOPIC, resource_name="orders", pattern_type=Pat.MATCH),
     {READ_ORDERS, DENY_PREFIX}),
    ("match takes literal *", AclFilter(resource_name="g1", pattern_type=Pat.MATCH), {GROUP_ALL}),
    ("principal", AclFilter(principal="User:bob"), {DENY_PREFIX}),
    ("host", AclFilter(host="10.0.0.1"), {DENY_PREFIX}),
    ("operation", AclFilter(operation=Op.ALL), {GROUP_ALL}),
    ("permission", AclFilter(permission_type=Perm.DENY), {DENY_PREFIX}),
    ("nothing", AclFilter(resource_type=Res.CLUSTER), set()),
]


@pytest.mark.parametrize("f, expected", [c[1:] for c in FILTERS], ids=[c[0] for c in FILTERS])
def test_filters(f: AclFilter, expected: set) -> None:
    assert {b for b in (READ_ORDERS, DENY_PREFIX, GROUP_ALL) if filter_matches(f, b)} == expected


def test_create_decision_skips_duplicates_and_refuses_invalid() -> None:
    existing = {"a": READ_ORDERS}
    bad = AclBinding(Res.TOPIC, "", Pat.LITERAL, "User:x", "*", Op.READ, Perm.ALLOW)
    records, outcomes = create_acls(existing, [READ_ORDERS, DENY_PREFIX, bad, DENY_PREFIX], lambda i: f"n{i}")
    assert records == (entry("n1", DENY_PREFIX),)
    assert [o.error for o in outcomes] == [None, None, ("INVALID_REQUEST", "the resource name is empty"), None]


def test_delete_decision_removes_each_once_and_reports_per_filter() -> None:
    existing = {"a": READ_ORDERS, "b": DENY_PREFIX, "c": GROUP_ALL}
    records, outcomes = delete_acls(existing, [AclFilter(resource_type=Res.TOPIC), AclFilter(principal="User:bob"),
                                               AclFilter(operation=0)])
    assert records == (RemoveAccessControlEntry("a"), RemoveAccessControlEntry("b"))
    assert outcomes[0].deleted == (READ_ORDERS, DENY_PREFIX)
    assert outcomes[1].deleted == (DENY_PREFIX,)
    assert outcomes[2].error == ("INVALID_REQUEST", "filter operation 0 is unknown")


def test_requests_too_big_for_one_control_frame_are_refused() -> None:
    from raftka.raft_meta.controller.controller_errors import ControllerError
    from raftka.raft_meta.security.acls import MAX_ACL_BYTES_PER_REQUEST, MAX_ACL_FIELD_CHARS

    big = [AclBinding(Res.TOPIC, f"{i:04d}" + "x" * (MAX_ACL_FIELD_CHARS - 4), Pat.LITERAL, "User:a", "*", Op.READ,
                      Perm.ALLOW) for i in range(MAX_ACL_BYTES_PER_REQUEST // MAX_ACL_FIELD_CHARS + 1)]
    with pytest.raises(ControllerError, match="POLICY_VIOLATION|one request may hold at most"):
        create_acls({}, big, str)
    existing = {str(i): b for i, b in enumerate(big)}
    with pytest.raises(ControllerError, match="one request may hold at most"):
        delete_acls(existing, [AclFilter()])
    records, _ = create_acls({}, big[:100], str)
    assert len(records) == 100
