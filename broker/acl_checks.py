"""What each API must be allowed to do, in one place (docs/security.md "Which check each API
makes"). Handlers make one call here; the decision itself is the pure StandardAuthorizer
(raft_meta/security/authorizer.py) over the current image's ACLs.

No authorizer configured (`ctx.authorizer` None, `authorizer.class.name` empty) means every
check passes, as in Kafka. The checks read two things of the node (`AuthorizationContext`: a
BrokerContext has both; a table test builds just those two). The caller is `conn.principal` at
`conn.host` (broker/net/network.py); a handler called without a connection (in-process tests)
is `User:ANONYMOUS` with no host.

Kafka's rules kept here:
- a denied caller gets the *authorization* error whether or not the resource exists (29, not
  3: existence is never revealed to someone who may not DESCRIBE it); lists are filtered by
  omission (all-topics Metadata, ListGroups);
- an explicit denial is logged (`acl.denied`, Kafka's authorizer log at INFO); filtering a
  list is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import structlog

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.security.acls import CLUSTER_NAME
from raftka.raft_meta.security.acls import AclOperation as Op
from raftka.raft_meta.security.acls import ResourceType as Res
from raftka.raft_meta.security.authorizer import OPERATIONS_BY_TYPE, operations_bitfield

if TYPE_CHECKING:
    from raftka.broker.net.network import ConnectionInfo
    from raftka.raft_meta.config.node_config import NodeConfig
    from raftka.raft_meta.metadata.image import MetadataImage
    from raftka.raft_meta.security.authorizer import StandardAuthorizer

log = structlog.get_logger("broker.acl")

ANONYMOUS = "User:ANONYMOUS"


class AuthorizationContext(Protocol):
    """What the checks read of the node (broker/context.py's BrokerContext has both)."""

    @property
    def authorizer(self) -> StandardAuthorizer | None:
        """The StandardAuthorizer with `authorizer.class.name` set; None: every check passes."""

    @property
    def image(self) -> MetadataImage:
        """The current metadata image, whose ACLs the authorizer reads."""


class AuthorizationError(Exception):
    """A per-partition denial raised inside a handler's try block; `code` is Kafka's error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


def caller(conn: ConnectionInfo | None) -> tuple[str, str]:
    return (conn.principal, conn.host) if conn is not None else (ANONYMOUS, "")


def enabled(ctx: AuthorizationContext) -> bool:
    return ctx.authorizer is not None


def allowed(ctx: AuthorizationContext, conn: ConnectionInfo | None,
            op: Op, resource_type: Res, name: str, *, log_denied: bool = True) -> bool:
    """May the caller do `op` on the resource? Always True without an authorizer."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    principal, host = caller(conn)
    if authorizer.authorize(ctx.image.acls, principal, host, op, resource_type, name):
        return True
    if log_denied:
        log.info("acl.denied", principal=principal, host=host, operation=op.name, resource_type=resource_type.name,
                 resource=name)
    return False


def cluster_allowed(ctx: AuthorizationContext, conn: ConnectionInfo | None, op: Op) -> bool:
    return allowed(ctx, conn, op, Res.CLUSTER, CLUSTER_NAME)


def topics_denied(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                  op: Op, names: Iterable[str], *, log_denied: bool = True) -> frozenset[str]:
    """The topics among `names` the caller may not `op` (empty without an authorizer)."""
    if not enabled(ctx):
        return frozenset()
    return frozenset(n for n in set(names) if not allowed(ctx, conn, op, Res.TOPIC, n, log_denied=log_denied))


def topic_denied_error(name: str) -> AuthorizationError:
    return AuthorizationError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to access topic {name!r}")


def group_error(ctx: AuthorizationContext, conn: ConnectionInfo | None, op: Op, group: str) -> int:
    """0, or GROUP_AUTHORIZATION_FAILED if the caller may not `op` the group."""
    return 0 if allowed(ctx, conn, op, Res.GROUP, group) else int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def cluster_error(ctx: AuthorizationContext, conn: ConnectionInfo | None, op: Op) -> int:
    """0, or CLUSTER_AUTHORIZATION_FAILED if the caller may not `op` the cluster."""
    return 0 if cluster_allowed(ctx, conn, op) else int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


# --- the per-API rules ------------------------------------------------------------------------

def fetch_denied(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                 follower: bool, topics: Iterable[str]) -> frozenset[str]:
    """Fetch: a follower needs CLUSTER_ACTION on the cluster (every partition denied without
    it); a consumer needs READ on each topic."""
    if not enabled(ctx):
        return frozenset()
    if follower:
        return frozenset() if cluster_allowed(ctx, conn, Op.CLUSTER_ACTION) else frozenset(topics)
    return topics_denied(ctx, conn, Op.READ, topics)


def offset_for_leader_epoch_denied(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                                   topics: Iterable[str]) -> frozenset[str]:
    """OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (followers) or DESCRIBE per topic."""
    if not enabled(ctx) or cluster_allowed(ctx, conn, Op.CLUSTER_ACTION):
        return frozenset()
    return topics_denied(ctx, conn, Op.DESCRIBE, topics)


def create_topic_denied(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                        names: Iterable[str]) -> frozenset[str]:
    """CreateTopics and Metadata's auto-creation: CREATE on the cluster, else CREATE per topic."""
    if not enabled(ctx) or allowed(ctx, conn, Op.CREATE, Res.CLUSTER, CLUSTER_NAME, log_denied=False):
        return frozenset()
    return topics_denied(ctx, conn, Op.CREATE, names)


def delete_topic_denied(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                        names: Iterable[str]) -> frozenset[str]:
    """DeleteTopics: DESCRIBE and DELETE on the topic (DELETE on the cluster grants both, KRaft)."""
    if not enabled(ctx) or allowed(ctx, conn, Op.DELETE, Res.CLUSTER, CLUSTER_NAME, log_denied=False):
        return frozenset()
    return topics_denied(ctx, conn, Op.DESCRIBE, names) | topics_denied(ctx, conn, Op.DELETE, names)


def idempotent_write_error(ctx: AuthorizationContext, conn: ConnectionInfo | None) -> int:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on
    some topic (KIP-679); else CLUSTER_AUTHORIZATION_FAILED."""
    authorizer = ctx.authorizer
    if authorizer is None or cluster_allowed(ctx, conn, Op.IDEMPOTENT_WRITE):
        return 0
    principal, host = caller(conn)
    if authorizer.authorize_any(ctx.image.acls, principal, host, Op.WRITE, Res.TOPIC):
        return 0
    return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def transactional_id_error(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                           op: Op, transactional_id: str) -> int:
    """0, or TRANSACTIONAL_ID_AUTHORIZATION_FAILED if the caller may not `op` the id."""
    if allowed(ctx, conn, op, Res.TRANSACTIONAL_ID, transactional_id):
        return 0
    return int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def visible_transactional_ids(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                              ids: Iterable[str]) -> set[str]:
    """ListTransactions: the ids the caller may DESCRIBE (others are omitted, never an error)."""
    return {i for i in ids if allowed(ctx, conn, Op.DESCRIBE, Res.TRANSACTIONAL_ID, i, log_denied=False)}


def visible_groups(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                   group_ids: Iterable[str]) -> set[str]:
    """ListGroups: every group with DESCRIBE on the cluster, else those the caller may DESCRIBE."""
    group_ids = set(group_ids)
    if not enabled(ctx) or allowed(ctx, conn, Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME, log_denied=False):
        return group_ids
    return {g for g in group_ids if allowed(ctx, conn, Op.DESCRIBE, Res.GROUP, g, log_denied=False)}


def authorized_operations(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                          resource_type: Res, name: str) -> int:
    """Kafka's `authorized_operations` bit field for the caller on a resource (all of the
    type's operations without an authorizer)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return operations_bitfield(OPERATIONS_BY_TYPE[resource_type])
    principal, host = caller(conn)
    return operations_bitfield(authorizer.authorized_operations(ctx.image.acls, principal, host, resource_type,
                                                                name))


# ConfigResource types (DescribeConfigs / AlterConfigs / IncrementalAlterConfigs)
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS, CONFIG_GROUP = 2, 4, 8, 16, 32


def config_resource_error(ctx: AuthorizationContext, conn: ConnectionInfo | None,
                          op: Op, resource_type: int, name: str) -> tuple[int, str] | None:
    """DescribeConfigs (DESCRIBE_CONFIGS) / AlterConfigs (ALTER_CONFIGS) on one config resource:
    a topic's own ACLs (29), a broker's, broker logger's or client-metrics subscription's the
    cluster's (31), a group's (30).
    None if allowed (or an unknown resource type: the handler refuses it itself)."""
    if not enabled(ctx):
        return None
    if resource_type == CONFIG_TOPIC:
        target, code = (Res.TOPIC, name), ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS):
        target, code = (Res.CLUSTER, CLUSTER_NAME), ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif resource_type == CONFIG_GROUP:
        target, code = (Res.GROUP, name), ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return None
    if allowed(ctx, conn, op, *target):
        return None
    return int(code), f"not authorized to {op.name} of {target[0].name.lower()} {target[1]!r}"


def anonymous_inter_broker_warning(config: NodeConfig) -> str | None:
    """Why replication may be denied, if the authorizer is on and brokers talk to each other
    over a PLAINTEXT listener (they are User:ANONYMOUS there and need CLUSTER_ACTION), else None."""
    if not config.authorizer_class_name or ANONYMOUS in config.super_users:
        return None
    name = config.inter_broker_listener_name
    protocol = dict(config.listener_security_protocol_map).get(name, name)
    if protocol != "PLAINTEXT":
        return None
    return (f"the authorizer is on and the inter-broker listener {name} is PLAINTEXT: brokers connect as "
            f"{ANONYMOUS}, so follower fetches need CLUSTER_ACTION on the cluster for it (an ACL, which lets any "
            "client on that port act as a broker); authenticate brokers (SSL/SASL) and list them in super.users")
