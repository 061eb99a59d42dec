"""One share consumer's membership in a share group (KIP-932), client side.

A share group member heartbeats as a KIP-848 member does (client/consumer_membership.py:
a member id the client made, epoch 0 to join, the broker's heartbeat interval, the target
assignment by topic id, FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID rejoin with epoch 0, -1 to
leave), with ShareGroupHeartbeat instead of ConsumerGroupHeartbeat. What differs is what it
does not do: it reports no owned partitions and never revokes, since a share partition may be
fetched by several members at once; the consumer simply starts and stops fetching as the
assignment changes. There is no static membership and no rebalance timeout.
"""

from __future__ import annotations

from raftka.client.cluster import Cluster
from raftka.client.consumer_membership import LEAVE_EPOCH, ConsumerMembership
from raftka.client.protocol import ApiKey, request_class

ShareGroupHeartbeatRequest = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)


class ShareMembership(ConsumerMembership):
    heartbeat_api = ApiKey.SHARE_GROUP_HEARTBEAT

    def __init__(self, cluster: Cluster, group_id: str, *, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, rack_id: str | None = None) -> None:
        super().__init__(cluster, group_id, retry_backoff_ms=retry_backoff_ms,
                         request_timeout_ms=request_timeout_ms)
        self.rack_id = rack_id

    async def _request(self, epoch: int):
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, rack_id=self.rack_id,
            subscribed_topic_names=sorted(self._topics()))

    def _leave_request(self, epoch: int):
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH, rack_id=None,
            subscribed_topic_names=None)


__all__ = ["ShareMembership"]
