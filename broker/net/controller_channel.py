"""How this broker asks the active controller for things.

Registration, heartbeats, topic changes, producer-id blocks and ISR changes
go to whichever node is the active controller: a local call when that is
this node, else a call over the control RPC (`broker/net/control_rpc.py`) to the
node the metadata names as controller (or the Raft leader). Either way the
caller sees the same methods and the same `ControllerError`s; NOT_CONTROLLER
means "try again shortly", as the controller role moves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from raftka.broker.net.control_rpc import (
    ControlRpcClient,
    alter_resource_to_wire,
    election_results_from_wire,
    errors_from_wire,
    heartbeat_reply,
    new_topic_to_wire,
    topic_results_from_wire,
)
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.controller.config_decisions import AlterResource
from raftka.raft_meta.controller.controller import Controller, HeartbeatReply, TopicResult
from raftka.raft_meta.controller.controller_decisions import NewTopic
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader

# Calls that may wait for a slow commit (until their request's deadline).
ADMIN_METHODS = frozenset({"create_topics", "create_partitions", "delete_topic", "create_acls", "delete_acls",
                           "alter_configs", "elect_leaders", "alter_scram_credentials", "alter_client_quotas",
                           "alter_partition_reassignments", "unregister_broker"})


class ControllerChannel:
    def __init__(self, config: NodeConfig, controller: Controller, loader: MetadataLoader) -> None:
        self._config = config
        self._controller = controller
        self._loader = loader
        self._clients: dict[tuple[int, str], ControlRpcClient] = {}

    def _remote_target(self) -> int:
        voters = {v.node_id for v in self._config.controller_quorum_voters}
        known = self._loader.image.controller.node_id
        if known in voters and known != self._config.node_id:
            return known
        leader = self._loader.quorum.leader_id
        if leader is not None and leader != self._config.node_id:
            return leader
        raise ControllerError(ErrorCode.NOT_CONTROLLER, "no active controller is known yet")

    async def _call(self, method: str, *, wire_args: dict[str, Any] | None = None,
                    from_wire: Callable[[Any], Any] | None = None, **args: Any) -> Any:
        """Call the active controller: locally, or over the control RPC with `wire_args`
        (default: `args`, tuples as lists), its answer read by `from_wire`.

        Admin calls, which may wait for a slow commit until their request's deadline, use a
        connection of their own: a connection carries one call at a time, and this broker's
        heartbeats must not queue behind them."""
        if self._loader.active_controller_epoch() is not None:
            return await getattr(self._controller, method)(**args)
        target = self._remote_target()
        lane = "admin" if method in ADMIN_METHODS else "session"
        client = self._clients.get((target, lane))
        if client is None:
            secret = self._config.controller_quorum_secret or ""
            client = ControlRpcClient(self._config.controller_rpc_address(target), secret, self._loader.cluster_id)
            self._clients[(target, lane)] = client
        if wire_args is None:
            wire_args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in args.items()}
        result = await client.call(method, **wire_args)
        return result if from_wire is None else from_wire(result)

    async def register_broker(self, broker_id: int, incarnation_id: str,
                              listeners: tuple[tuple[str, str, int], ...], rack: str | None) -> int:
        return await self._call("register_broker", broker_id=broker_id, incarnation_id=incarnation_id,
                                listeners=listeners, rack=rack)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_shutdown: bool = False) -> HeartbeatReply:
        result = await self._call("heartbeat", broker_id=broker_id, broker_epoch=broker_epoch,
                                  metadata_offset=metadata_offset, want_shutdown=want_shutdown)
        return result if isinstance(result, HeartbeatReply) else heartbeat_reply(result)

    async def create_topics(self, topics: Sequence[NewTopic], timeout_ms: int | None = None) -> list[TopicResult]:
        """One CreateTopics request (a result per topic; whole-request errors raised)."""
        wire = {"topics": [new_topic_to_wire(t) for t in topics], "timeout_ms": timeout_ms}
        return await self._call("create_topics", wire_args=wire, from_wire=topic_results_from_wire,
                                topics=list(topics), timeout_ms=timeout_ms)

    async def create_topic(self, name: str, num_partitions: int | None, replication_factor: int | None,
                           configs: dict[str, str] | None) -> str:
        [result] = await self.create_topics([NewTopic(name, num_partitions, replication_factor, configs or {})])
        if result.error is not None:
            raise result.error
        assert result.topic_id is not None
        return result.topic_id

    async def delete_topic(self, name: str, timeout_ms: int | None = None) -> None:
        await self._call("delete_topic", name=name, timeout_ms=timeout_ms)

    async def create_partitions(self, totals: Sequence[tuple[str, int]], timeout_ms: int | None = None,
                                assignments: Mapping[str, Sequence[tuple[int, ...]]] | None = None,
                                ) -> list[TopicResult]:
        """One CreatePartitions request (a result per topic; whole-request errors raised)."""
        wire: dict[str, Any] = {"totals": [[name, total] for name, total in totals], "timeout_ms": timeout_ms}
        if assignments:
            wire["assignments"] = {name: [list(r) for r in lists] for name, lists in assignments.items()}
        return await self._call("create_partitions", wire_args=wire, from_wire=topic_results_from_wire,
                                totals=list(totals), timeout_ms=timeout_ms, assignments=assignments)

    async def alter_configs(self, resources: Sequence[AlterResource],
                            timeout_ms: int | None = None) -> list[ControllerError | None]:
        """One (Incremental)AlterConfigs request: each resource's error (None: changed)."""
        wire = {"resources": [alter_resource_to_wire(r) for r in resources], "timeout_ms": timeout_ms}
        return await self._call("alter_configs", wire_args=wire, from_wire=errors_from_wire,
                                resources=list(resources), timeout_ms=timeout_ms)

    async def elect_leaders(self, election_type: int, partitions: Sequence[tuple[str, int]] | None,
                            timeout_ms: int | None = None) -> list[tuple[str, int, ControllerError | None]]:
        """One ElectLeaders request: (topic, partition, error or None) per partition reported."""
        wire = {"election_type": election_type, "timeout_ms": timeout_ms,
                "partitions": None if partitions is None else [[n, p] for n, p in partitions]}
        return await self._call("elect_leaders", wire_args=wire, from_wire=election_results_from_wire,
                                election_type=election_type, partitions=partitions, timeout_ms=timeout_ms)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        first, size = await self._call("allocate_producer_ids", broker_id=broker_id, broker_epoch=broker_epoch)
        return first, size

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]) -> tuple[int, int]:
        leader_epoch_after, partition_epoch_after = await self._call(
            "alter_partition", broker_id=broker_id, broker_epoch=broker_epoch, topic_id=topic_id,
            partition=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch, new_isr=new_isr)
        return leader_epoch_after, partition_epoch_after

    async def create_acls(self, acls: Sequence[Sequence]) -> list[list]:
        """One CreateAcls request: `AclBinding.to_wire()` lists in, `[error name, message]`
        (or `[None, None]`) per ACL out (see `Controller.create_acls`)."""
        return await self._call("create_acls", acls=[list(a) for a in acls])

    async def delete_acls(self, filters: Sequence[Sequence]) -> list[dict]:
        """One DeleteAcls request (see `Controller.delete_acls`)."""
        return await self._call("delete_acls", filters=[list(f) for f in filters])
    async def alter_scram_credentials(self, deletions: list, upsertions: list) -> list:
        """A ScramResult per user (raft_meta/security/scram_decisions.py)."""
        from raftka.raft_meta.security.scram_decisions import ScramResult

        wire = {"deletions": [[n, m] for n, m in deletions],
                "upsertions": [[u.name, u.mechanism, u.iterations, u.salt, u.stored_key, u.server_key]
                               for u in upsertions]}

        def from_wire(data: list) -> list:
            return [ScramResult(str(user), error, message) for user, error, message in data]

        return await self._call("alter_scram_credentials", wire_args=wire, from_wire=from_wire,
                                deletions=deletions, upsertions=upsertions)

    async def alter_client_quotas(self, alterations: list, validate_only: bool = False) -> list:
        """A QuotaResult per entry (raft_meta/controller/quota_decisions.py)."""
        from raftka.raft_meta.controller.quota_decisions import QuotaResult

        wire = {"alterations": [[[list(c) for c in a.components], [list(op) for op in a.ops]] for a in alterations],
                "validate_only": validate_only}

        def from_wire(data: list) -> list:
            return [QuotaResult(tuple((t, n) for t, n in components), error, message)
                    for components, error, message in data]

        return await self._call("alter_client_quotas", wire_args=wire, from_wire=from_wire,
                                alterations=alterations, validate_only=validate_only)

    async def alter_partition_reassignments(self, reassignments: Sequence[Sequence], allow_rf_change: bool = True,
                                            timeout_ms: int | None = None) -> list[list]:
        """One AlterPartitionReassignments request (see `Controller.alter_partition_reassignments`)."""
        return await self._call("alter_partition_reassignments",
                                reassignments=[[t, p, None if r is None else list(r)] for t, p, r in reassignments],
                                allow_rf_change=allow_rf_change, timeout_ms=timeout_ms)

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (see `Controller.unregister_broker`)."""
        await self._call("unregister_broker", broker_id=broker_id)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
