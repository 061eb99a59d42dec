"""UnregisterBroker (Kafka's `kafka-cluster unregister`), as a pure decision.

As KRaft's `handleBrokerUnregistered`: the broker's leaderships move to another live in-sync
replica, it leaves every ISR (the last member of an ISR stays, leaderless, as a fence does),
and its registration is removed. Its replicas stay listed in the partitions (offline, as in
Kafka) until they are reassigned; `raftka brokers drain` first, then unregister, retires a
broker with nothing lost. A broker that is still running notices at its next heartbeat
(BROKER_ID_NOT_REGISTERED) and registers again, as a Kafka broker does.
"""

from __future__ import annotations

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.controller import controller_decisions as decide
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import UnregisterBroker


def unregister_broker(image: MetadataImage, broker_id: int, request_id: str | None = None) -> decide.Decision:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ControllerError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                                      f"broker {broker_id} is not registered (registered: {sorted(image.brokers)})")
    moved = decide.fence_broker(image, broker_id, unclean_default=False)
    return decide.Decision((*moved.records, UnregisterBroker(broker_id, broker.epoch, request_id=request_id)),
                           moved.warnings)
