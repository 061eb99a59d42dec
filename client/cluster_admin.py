"""Cluster membership administration over a Cluster: UnregisterBroker (Kafka key 64), what
`kafka-cluster unregister` sends. Used by `raftka brokers unregister`."""

from __future__ import annotations

from raftka.client.cluster import Cluster
from raftka.client.errors import error_for_code
from raftka.client.protocol import ApiKey, request_class

UnregisterBrokerRequest = request_class(ApiKey.UNREGISTER_BROKER)


async def unregister_broker(cluster: Cluster, broker_id: int) -> None:
    """Remove a broker's registration; a refusal (e.g. BrokerIdNotRegisteredError) is raised."""
    response = await cluster.send_any(ApiKey.UNREGISTER_BROKER, UnregisterBrokerRequest(broker_id=broker_id))
    if response.error_code:
        raise error_for_code(response.error_code, f"UnregisterBroker {broker_id}: {response.error_message or ''}")
