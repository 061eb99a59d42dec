"""How this broker asks the active controller for things.

Registration, heartbeats, topic changes, producer-id blocks and ISR changes
go to whichever node is the active controller: a local call when that is
this node, else a call over the control RPC (`broker/control_rpc.py`) to the
node the metadata names as controller (or the Raft leader). Either way the
caller sees the same methods and the same `ControllerError`s; NOT_CONTROLLER
means "try again shortly", as the controller role moves.
"""

from __future__ import annotations

from typing import Any

from raftka.broker.control_rpc import ControlRpcClient, heartbeat_reply
from raftka.raft_meta.controller import Controller, HeartbeatReply
from raftka.raft_meta.controller_errors import ControllerError
from raftka.raft_meta.metadata_loader import MetadataLoader
from raftka.raft_meta.node_config import NodeConfig


class ControllerChannel:
    def __init__(self, config: NodeConfig, controller: Controller, loader: MetadataLoader) -> None:
        self._config = config
        self._controller = controller
        self._loader = loader
        self._clients: dict[int, ControlRpcClient] = {}

    def _remote_target(self) -> int:
        voters = {v.node_id for v in self._config.controller_quorum_voters}
        known = self._loader.image.controller.node_id
        if known in voters and known != self._config.node_id:
            return known
        leader = self._loader.quorum.leader_id
        if leader is not None and leader != self._config.node_id:
            return leader
        raise ControllerError("NOT_CONTROLLER", "no active controller is known yet")

    async def _call(self, method: str, **args: Any) -> Any:
        if self._loader.active_controller_epoch() is not None:
            return await getattr(self._controller, method)(**args)
        target = self._remote_target()
        client = self._clients.get(target)
        if client is None:
            secret = self._config.controller_quorum_secret or ""
            client = self._clients[target] = ControlRpcClient(self._config.controller_rpc_address(target), secret,
                                                              self._loader.cluster_id)
        wire_args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in args.items()}
        return await client.call(method, **wire_args)

    async def register_broker(self, broker_id: int, incarnation_id: str,
                              listeners: tuple[tuple[str, str, int], ...], rack: str | None) -> int:
        return await self._call("register_broker", broker_id=broker_id, incarnation_id=incarnation_id,
                                listeners=listeners, rack=rack)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_shutdown: bool = False) -> HeartbeatReply:
        result = await self._call("heartbeat", broker_id=broker_id, broker_epoch=broker_epoch,
                                  metadata_offset=metadata_offset, want_shutdown=want_shutdown)
        return result if isinstance(result, HeartbeatReply) else heartbeat_reply(result)

    async def create_topic(self, name: str, num_partitions: int | None, replication_factor: int | None,
                           configs: dict[str, str] | None) -> str:
        return await self._call("create_topic", name=name, num_partitions=num_partitions,
                                replication_factor=replication_factor, configs=configs)

    async def delete_topic(self, name: str) -> None:
        await self._call("delete_topic", name=name)

    async def create_partitions(self, name: str, total: int) -> None:
        await self._call("create_partitions", name=name, total=total)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        first, size = await self._call("allocate_producer_ids", broker_id=broker_id, broker_epoch=broker_epoch)
        return first, size

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]) -> tuple[int, int]:
        leader_epoch_after, partition_epoch_after = await self._call(
            "alter_partition", broker_id=broker_id, broker_epoch=broker_epoch, topic_id=topic_id,
            partition=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch, new_isr=new_isr)
        return leader_epoch_after, partition_epoch_after

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
