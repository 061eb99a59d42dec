"""Replication throttles (Kafka's KIP-73, `ReplicationQuotaManager`): a pure core.

Two quotas per broker, each a byte rate over sampled windows:

- leader: bytes this broker serves to FOLLOWER fetches of throttled partitions, bounded by
  `leader.replication.throttled.rate`;
- follower: bytes this broker's replica fetchers receive for throttled partitions, bounded
  by `follower.replication.throttled.rate`.

Both rates are dynamic broker configs (`kafka-configs --entity-type brokers`): this broker's
own value wins over the cluster-wide default (`--entity-default`), which wins over
server.properties; unset, Long.MAX (no limit). Which partitions are throttled is a topic
config, `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
"*" (every partition of the topic, on every broker) or `partition:broker` pairs, of which a
broker keeps the ones naming itself (Kafka's `TopicConfigHandler.parseThrottledPartitions`).

Kafka's decisions, followed exactly:
- `isQuotaExceeded` is checked BEFORE reading and the bytes are recorded after the answer is
  built, so one fetch may go over the quota (the average over the windows is what is bounded).
- The leader answers a throttled partition without records when the quota is exceeded, unless
  the fetching replica is in the ISR (`ReplicaManager.shouldLeaderThrottle`: "to avoid ISR
  thrashing"). The bytes of EVERY throttled partition in a follower fetch count, in sync or
  not (`KafkaApis.sizeOfThrottledPartitions`).
- The follower leaves a throttled partition out of its fetch when its quota is exceeded, unless
  the replica has caught up with the leader's high watermark (`shouldFollowerThrottle`,
  `PartitionFetchState.isReplicaInSync`); every throttled partition's received bytes count.
- The meter is Kafka's `SimpleRate` over a `SampledStat`: `replication.quota.window.num`
  samples (11) of `replication.quota.window.size.seconds` (1) each; the rate is the bytes of the
  live samples over the time since the oldest one started, at least one window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from raftka.raft_meta.controller.config_decisions import THROTTLED_RATE_KEYS
from raftka.raft_meta.metadata.image import MetadataImage

LONG_MAX = 2**63 - 1  # Kafka's QuotaBytesPerSecondDefault: unthrottled
LEADER_RATE, FOLLOWER_RATE = THROTTLED_RATE_KEYS
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
ALL_PARTITIONS = None  # `throttled_partitions` of "*"


@dataclass
class _Sample:
    start: float
    last_event: float
    value: float = 0.0

    def reset(self, now: float) -> None:
        self.start = self.last_event = now
        self.value = 0.0


class SampledRate:
    """Kafka's `SimpleRate` over a `SampledStat` (time windows only): `samples` windows of
    `window_s` seconds, plus the one being recycled. Times are seconds from any monotonic
    clock, passed in."""

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        if samples < 1 or window_s <= 0:
            raise ValueError(f"samples {samples} and window {window_s}s; expected samples >= 1 and a window > 0")
        self.samples = samples
        self.window_s = window_s
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now, now))
        sample = self._samples[self._current]
        if now - sample.start >= self.window_s:  # complete: start the next sample
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now, now)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now)
        sample.value += value
        sample.last_event = now

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        for sample in self._samples:
            if now - sample.last_event >= expire:
                sample.reset(now)

    def rate(self, now: float) -> float:
        """Bytes per second over the live samples (0 before anything was recorded)."""
        if not self._samples:
            return 0.0
        self._purge(now)
        oldest = min(s.start for s in self._samples)
        return sum(s.value for s in self._samples) / max(now - oldest, self.window_s)

    def exceeds(self, bound: float, now: float) -> bool:
        """Kafka's `checkQuotas` with an upper bound: the rate is over it."""
        return self.rate(now) > bound


@lru_cache(maxsize=4096)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a `*.replication.throttled.replicas` value throttles on `broker_id`:
    ALL_PARTITIONS (None) for "*", else the partitions of the pairs naming the broker. A value
    that is not a valid list (the controller validates them; a defect) throttles nothing."""
    text = value.strip()
    if text == "*":
        return ALL_PARTITIONS
    out = set()
    for item in text.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            continue
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def is_throttled(topic_configs: Mapping[str, str], key: str, partition: int, broker_id: int) -> bool:
    """Kafka's `ReplicationQuotaManager.isThrottled` for one side (`key`) on `broker_id`."""
    value = topic_configs.get(key)
    if not value:
        return False
    partitions = throttled_partitions(value, broker_id)
    return partitions is ALL_PARTITIONS or partition in partitions


def throttle_rate(image: MetadataImage, broker_id: int, key: str, static: Mapping[str, str]) -> int:
    """The bound of `key` on `broker_id`: its own dynamic value, the cluster-wide dynamic default,
    server.properties, else LONG_MAX."""
    for source in (image.configs.get(("broker", str(broker_id)), {}), image.configs.get(("cluster", ""), {}),
                   static):
        raw = source.get(key)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                continue  # validated where set; a defect, not a reason to stop replicating
    return LONG_MAX


class ReplicationQuota:
    """One side's quota on one broker: which partitions it covers, its bound, its meter."""

    def __init__(self, side: str, broker_id: int, samples: int = 11, window_s: float = 1.0,
                 static: Mapping[str, str] | None = None) -> None:
        if side not in ("leader", "follower"):
            raise ValueError(f"side {side!r}; expected 'leader' or 'follower'")
        self.side = side
        self.broker_id = broker_id
        self.rate_key = LEADER_RATE if side == "leader" else FOLLOWER_RATE
        self.replicas_key = LEADER_REPLICAS if side == "leader" else FOLLOWER_REPLICAS
        self.static = dict(static or {})
        self.meter = SampledRate(samples, window_s)
        self.throttled_bytes = 0  # every byte recorded (the metrics endpoint's counter)

    def is_throttled(self, image: MetadataImage, topic: str, partition: int) -> bool:
        configs = image.configs.get(("topic", topic))
        return bool(configs) and is_throttled(configs, self.replicas_key, partition, self.broker_id)

    def bound(self, image: MetadataImage) -> int:
        return throttle_rate(image, self.broker_id, self.rate_key, self.static)

    def is_exceeded(self, image: MetadataImage, now: float) -> bool:
        bound = self.bound(image)
        return bound < LONG_MAX and self.meter.exceeds(bound, now)

    def record(self, nbytes: int, now: float) -> None:
        if nbytes > 0:
            self.meter.record(nbytes, now)
            self.throttled_bytes += nbytes


class ReplicationQuotas:
    """The broker's two quotas (held by the replica manager: the fetch handler and the
    replica fetchers share them) and Kafka's two decisions."""

    def __init__(self, broker_id: int, samples: int = 11, window_s: float = 1.0,
                 static: Mapping[str, str] | None = None) -> None:
        self.leader = ReplicationQuota("leader", broker_id, samples, window_s, static)
        self.follower = ReplicationQuota("follower", broker_id, samples, window_s, static)

    @classmethod
    def from_config(cls, config) -> ReplicationQuotas:
        """From a NodeConfig: its window settings and its server.properties rates."""
        return cls(config.node_id, config.replication_quota_window_num,
                   float(config.replication_quota_window_size_seconds),
                   {LEADER_RATE: str(config.leader_replication_throttled_rate),
                    FOLLOWER_RATE: str(config.follower_replication_throttled_rate)})

    def leader_throttles(self, image: MetadataImage, topic: str, partition: int, isr, replica_id: int,
                         now: float) -> bool:
        """`shouldLeaderThrottle`: answer follower `replica_id` without records for this
        partition (throttled here, the follower out of the ISR, the leader quota exceeded)."""
        q = self.leader
        return q.is_throttled(image, topic, partition) and replica_id not in isr and q.is_exceeded(image, now)

    def follower_throttles(self, image: MetadataImage, topic: str, partition: int, in_sync: bool,
                           now: float) -> bool:
        """`shouldFollowerThrottle`: leave this partition out of the next fetch (throttled
        here, not caught up with the leader's high watermark, the follower quota exceeded)."""
        q = self.follower
        return q.is_throttled(image, topic, partition) and not in_sync and q.is_exceeded(image, now)

    def record_leader_response(self, image: MetadataImage, sizes, now: float) -> None:
        """Record a follower fetch's answer: `sizes` yields (topic, partition, record bytes);
        the throttled partitions' bytes count, in sync or not (`sizeOfThrottledPartitions`)."""
        q = self.leader
        q.record(sum(n for topic, partition, n in sizes if n and q.is_throttled(image, topic, partition)), now)
