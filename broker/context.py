"""What request handlers need from the running node, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

from raftka.broker.client_quotas import ClientQuotas
from raftka.broker.group.group_coordinator import GroupCoordinator
from raftka.broker.group.share_coordinator import ShareCoordinator
from raftka.broker.group.share_partition_manager import SharePartitionManager
from raftka.broker.group.share_persister import Persister
from raftka.broker.metrics import BrokerMetrics
from raftka.broker.net.controller_channel import ControllerChannel
from raftka.broker.replication.fetch_session_state import FetchSessionCache
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.broker.txn.producer_ids import ProducerIdManager
from raftka.broker.txn.txn_coordinator import TxnCoordinator
from raftka.broker.txn.txn_verification import TxnVerifier
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.security.authorizer import StandardAuthorizer


@dataclass
class BrokerContext:
    """Every handler's `ctx` (broker/handlers/__init__.py's Handler); broker/node.py builds the one
    of a running node. Only the authorizer is optional (None: no ACL checks)."""

    config: NodeConfig
    cluster_id: str
    loader: MetadataLoader
    replicas: ReplicaManager
    controller: ControllerChannel
    producer_ids: ProducerIdManager
    groups: GroupCoordinator
    txns: TxnCoordinator
    # KIP-890 part 1: partition leaders verify transactional writes with the coordinator.
    txn_verifier: TxnVerifier
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    broker_epoch: int = -1
    # Set once the node is registered and unfenced; False again during shutdown.
    serving: bool = field(default=False)
    # authorizer.class.name set: the StandardAuthorizer (broker/acl_checks.py); None = no checks.
    authorizer: StandardAuthorizer | None = None
    # Client byte-rate quotas' sensors (broker/client_quotas.py).
    client_quotas: ClientQuotas = field(default_factory=ClientQuotas.create)
    # Share groups (KIP-932): the share coordinator of the `__share_group_state` partitions led
    # here, the share partitions this broker leads (ShareFetch/ShareAcknowledge), and the
    # Persister every part of the broker reaches the share state through (None in a test's context).
    share_coordinator: ShareCoordinator | None = None
    shares: SharePartitionManager | None = None
    share_persister: Persister | None = None

    @property
    def persister(self) -> Persister:
        """`share_persister`, which every serving broker has (broker/node.py builds it)."""
        if self.share_persister is None:
            raise RuntimeError("this broker context has no share persister (broker/node.py builds one)")
        return self.share_persister

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    @property
    def metrics(self) -> BrokerMetrics:
        return self.replicas.metrics
