"""How this broker asks the active controller for things.

Registration, heartbeats, topic changes, producer-id blocks and ISR changes
go to whichever node is the active controller. When that is this node, the
call is local; otherwise it would travel over the internal control channel
(the multi-broker issue adds that RPC). Either way the caller sees the same
interface and the same `ControllerError`s.
"""

from __future__ import annotations

from raft_meta.controller import Controller, HeartbeatReply
from raft_meta.controller_errors import ControllerError
from raft_meta.metadata_loader import MetadataLoader


class ControllerChannel:
    def __init__(self, controller: Controller, loader: MetadataLoader) -> None:
        self._controller = controller
        self._loader = loader

    def _target(self) -> Controller:
        if self._loader.active_controller_epoch() is None:
            leader = self._loader.image.controller.node_id
            raise ControllerError(
                "NOT_CONTROLLER",
                f"this node is not the active controller (controller is node {leader}); "
                "remote controller calls are not available yet",
            )
        return self._controller

    async def register_broker(self, broker_id: int, incarnation_id: str,
                              listeners: tuple[tuple[str, str, int], ...], rack: str | None) -> int:
        return await self._target().register_broker(broker_id, incarnation_id, listeners, rack)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_shutdown: bool = False) -> HeartbeatReply:
        return await self._target().heartbeat(broker_id, broker_epoch, metadata_offset, want_shutdown)

    async def create_topic(self, name: str, num_partitions: int | None, replication_factor: int | None,
                           configs: dict[str, str] | None) -> str:
        return await self._target().create_topic(name, num_partitions, replication_factor, configs)

    async def delete_topic(self, name: str) -> None:
        await self._target().delete_topic(name)

    async def create_partitions(self, name: str, total: int) -> None:
        await self._target().create_partitions(name, total)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        return await self._target().allocate_producer_ids(broker_id, broker_epoch)

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]) -> tuple[int, int]:
        return await self._target().alter_partition(broker_id, broker_epoch, topic_id, partition,
                                                    leader_epoch, partition_epoch, new_isr)
