"""Each API's authorization rule (broker/acl_checks.py) as tables, for named users: the ACLs in
force, who calls, and what the rule answers (docs/security.md "Which check each API makes")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from raftka.broker import acl_checks
from raftka.broker.net.network import ConnectionInfo
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import NodeConfig, parse_node_config
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.security.acls import AclBinding
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import AclPermissionType as Perm
from raftka.raft_meta.security.acls import PatternType as Pat
from raftka.raft_meta.security.acls import ResourceType as Res
from raftka.raft_meta.security.authorizer import StandardAuthorizer

ALICE = ConnectionInfo(1, "PLAINTEXT", "10.0.0.1:50000", "User:alice")
BROKER = ConnectionInfo(2, "PLAINTEXT", "10.0.0.2:50001", "User:broker")


def allow(res: Res, name: str, op: Op, principal: str = "User:alice", pattern: Pat = Pat.LITERAL) -> AclBinding:
    return AclBinding(res, name, pattern, principal, "*", op, Perm.ALLOW)


def deny(res: Res, name: str, op: Op, principal: str = "User:alice") -> AclBinding:
    return AclBinding(res, name, Pat.LITERAL, principal, "*", op, Perm.DENY)


@dataclass(frozen=True)
class Authorization:
    """The minimal acl_checks.AuthorizationContext: what the checks read of a BrokerContext."""

    authorizer: StandardAuthorizer | None
    image: MetadataImage


def ctx(*bindings: AclBinding, super_users=("User:admin",)) -> Authorization:
    image = MetadataImage(acls={f"id{i}": b for i, b in enumerate(bindings)})
    return Authorization(StandardAuthorizer(super_users), image)


CLUSTER = ("kafka-cluster",)


def test_no_authorizer_allows_everything() -> None:
    off = Authorization(None, MetadataImage())
    assert acl_checks.topics_denied(off, ALICE, Op.WRITE, ["t"]) == frozenset()
    assert acl_checks.fetch_denied(off, ALICE, True, ["t"]) == frozenset()
    assert acl_checks.idempotent_write_error(off, ALICE) == 0
    assert acl_checks.group_error(off, None, Op.READ, "g") == 0
    assert acl_checks.authorized_operations(off, ALICE, Res.TOPIC, "t") == 3576


FETCH = [
    ("consumer with READ", [allow(Res.TOPIC, "a", Op.READ)], ALICE, False, {"b"}),
    ("consumer with WRITE only", [allow(Res.TOPIC, "a", Op.WRITE)], ALICE, False, {"a", "b"}),
    ("follower without CLUSTER_ACTION", [allow(Res.TOPIC, "*", Op.ALL, "User:broker")], BROKER, True, {"a", "b"}),
    ("follower with CLUSTER_ACTION", [allow(Res.CLUSTER, *CLUSTER, Op.CLUSTER_ACTION, "User:broker")], BROKER, True,
     set()),
]


@pytest.mark.parametrize("bindings, conn, follower, denied", [c[1:] for c in FETCH], ids=[c[0] for c in FETCH])
def test_fetch(bindings, conn, follower, denied) -> None:
    assert acl_checks.fetch_denied(ctx(*bindings), conn, follower, ["a", "b"]) == denied


CREATE = [
    ("CREATE on the cluster", [allow(Res.CLUSTER, *CLUSTER, Op.CREATE)], set()),
    ("CREATE on a topic prefix", [allow(Res.TOPIC, "a", Op.CREATE, pattern=Pat.PREFIXED)], {"b"}),
    ("nothing", [allow(Res.TOPIC, "a", Op.WRITE)], {"a", "b"}),
]


@pytest.mark.parametrize("bindings, denied", [c[1:] for c in CREATE], ids=[c[0] for c in CREATE])
def test_create_topics(bindings, denied) -> None:
    assert acl_checks.create_topic_denied(ctx(*bindings), ALICE, ["a1", "b"]) == {n for n in ["a1", "b"]
                                                                                  if n[0] in denied}


DELETE = [
    ("DELETE on the cluster grants both", [allow(Res.CLUSTER, *CLUSTER, Op.DELETE)], set()),
    ("DELETE on the topic (implies DESCRIBE)", [allow(Res.TOPIC, "a", Op.DELETE)], {"b"}),
    ("DESCRIBE only", [allow(Res.TOPIC, "*", Op.DESCRIBE)], {"a", "b"}),
]


@pytest.mark.parametrize("bindings, denied", [c[1:] for c in DELETE], ids=[c[0] for c in DELETE])
def test_delete_topics(bindings, denied) -> None:
    assert acl_checks.delete_topic_denied(ctx(*bindings), ALICE, ["a", "b"]) == denied


IDEMPOTENT = [
    ("IDEMPOTENT_WRITE on the cluster", [allow(Res.CLUSTER, *CLUSTER, Op.IDEMPOTENT_WRITE)], 0),
    ("WRITE on some topic (KIP-679)", [allow(Res.TOPIC, "a", Op.WRITE)], 0),
    ("WRITE denied where allowed", [allow(Res.TOPIC, "a", Op.WRITE), deny(Res.TOPIC, "a", Op.WRITE)],
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("READ only", [allow(Res.TOPIC, "a", Op.READ)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
]


@pytest.mark.parametrize("bindings, code", [c[1:] for c in IDEMPOTENT], ids=[c[0] for c in IDEMPOTENT])
def test_init_producer_id(bindings, code) -> None:
    assert acl_checks.idempotent_write_error(ctx(*bindings), ALICE) == code


def test_groups() -> None:
    c = ctx(allow(Res.GROUP, "g", Op.READ), allow(Res.GROUP, "d", Op.DESCRIBE))
    assert acl_checks.group_error(c, ALICE, Op.READ, "g") == 0
    assert acl_checks.group_error(c, ALICE, Op.READ, "d") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert acl_checks.group_error(c, ALICE, Op.DELETE, "g") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert acl_checks.visible_groups(c, ALICE, ["g", "d", "x"]) == {"g", "d"}
    everything = ctx(allow(Res.CLUSTER, *CLUSTER, Op.DESCRIBE))
    assert acl_checks.visible_groups(everything, ALICE, ["g", "x"]) == {"g", "x"}


CONFIGS = [
    ("topic", Op.DESCRIBE_CONFIGS, 2, "t", [allow(Res.TOPIC, "t", Op.ALTER_CONFIGS)], None),
    ("topic denied", Op.ALTER_CONFIGS, 2, "t", [allow(Res.TOPIC, "t", Op.DESCRIBE_CONFIGS)],
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("broker", Op.DESCRIBE_CONFIGS, 4, "1", [allow(Res.CLUSTER, *CLUSTER, Op.DESCRIBE_CONFIGS)], None),
    ("broker denied", Op.DESCRIBE_CONFIGS, 4, "1", [allow(Res.TOPIC, "*", Op.ALL)],
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ("group denied", Op.DESCRIBE_CONFIGS, 32, "g", [allow(Res.TOPIC, "*", Op.ALL)],
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
]


@pytest.mark.parametrize("op, kind, name, bindings, code", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_config_resources(op, kind, name, bindings, code) -> None:
    refusal = acl_checks.config_resource_error(ctx(*bindings), ALICE, op, kind, name)
    assert (refusal[0] if refusal else None) == code


def test_super_user_and_anonymous_without_connection() -> None:
    c = ctx(deny(Res.TOPIC, "*", Op.ALL, "User:*"))
    admin = ConnectionInfo(3, "PLAINTEXT", "[::1]:40000", "User:admin")
    assert acl_checks.topics_denied(c, admin, Op.WRITE, ["t"]) == frozenset()
    assert acl_checks.topics_denied(c, None, Op.WRITE, ["t"]) == {"t"}  # in-process: User:ANONYMOUS


def test_authorized_operations_bitfield() -> None:
    c = ctx(allow(Res.TOPIC, "t", Op.READ))
    assert acl_checks.authorized_operations(c, ALICE, Res.TOPIC, "t") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert acl_checks.authorized_operations(c, ALICE, Res.CLUSTER, "kafka-cluster") == 0


def node_config(**properties: str) -> NodeConfig:
    return parse_node_config({"node.id": "1", "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                              "controller.quorum.voters": "1@localhost:9093", "log.dirs": "/tmp/unused",
                              "controller.quorum.secret": "s" * 20, **properties}, env={})


@pytest.mark.parametrize("properties, warned", [
    ({}, False),  # no authorizer
    ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}, True),
    ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
      "super.users": "User:ANONYMOUS"}, False),
])
def test_anonymous_inter_broker_warning(properties: dict, warned: bool) -> None:
    config = node_config(**properties)
    assert (acl_checks.anonymous_inter_broker_warning(config) is not None) is warned


def test_no_warning_when_brokers_use_a_secured_listener() -> None:
    # The rule only reads the protocol map: a parsed config with the inter-broker listener on SASL_SSL.
    config = dataclasses.replace(
        node_config(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}),
        inter_broker_listener_name="INTERNAL", listener_security_protocol_map=(("INTERNAL", "SASL_SSL"),))
    assert acl_checks.anonymous_inter_broker_warning(config) is None


TXN_IDS = [
    ("WRITE on the id", [allow(Res.TRANSACTIONAL_ID, "tx-1", Op.WRITE)], Op.WRITE, "tx-1", 0),
    ("WRITE implies DESCRIBE", [allow(Res.TRANSACTIONAL_ID, "tx-1", Op.WRITE)], Op.DESCRIBE, "tx-1", 0),
    ("prefixed WRITE", [allow(Res.TRANSACTIONAL_ID, "tx-", Op.WRITE, pattern=Pat.PREFIXED)], Op.WRITE, "tx-9", 0),
    ("another id", [allow(Res.TRANSACTIONAL_ID, "tx-1", Op.WRITE)], Op.WRITE, "tx-2", 53),
    ("DESCRIBE only", [allow(Res.TRANSACTIONAL_ID, "tx-1", Op.DESCRIBE)], Op.WRITE, "tx-1", 53),
    ("denied", [allow(Res.TRANSACTIONAL_ID, "*", Op.ALL), deny(Res.TRANSACTIONAL_ID, "tx-1", Op.WRITE)],
     Op.WRITE, "tx-1", 53),
    ("topic WRITE is not enough", [allow(Res.TOPIC, "*", Op.WRITE)], Op.WRITE, "tx-1", 53),
]


@pytest.mark.parametrize("bindings, op, tid, code", [c[1:] for c in TXN_IDS], ids=[c[0] for c in TXN_IDS])
def test_transactional_id(bindings, op, tid, code) -> None:
    """InitProducerId/AddPartitions/AddOffsets/EndTxn need WRITE on the id; FindCoordinator and
    DescribeTransactions DESCRIBE (implied by WRITE); else 53."""
    assert acl_checks.transactional_id_error(ctx(*bindings), ALICE, op, tid) == code


def test_list_transactions_omits_ids_the_caller_may_not_describe() -> None:
    rules = ctx(allow(Res.TRANSACTIONAL_ID, "mine-", Op.DESCRIBE, pattern=Pat.PREFIXED))
    assert acl_checks.visible_transactional_ids(rules, ALICE, ["mine-1", "theirs", "mine-2"]) == {"mine-1", "mine-2"}
