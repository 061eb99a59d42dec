"""Client byte-rate quotas enforced (KIP-13, KIP-55, KIP-219): Kafka's ClientQuotaManager.

The quotas live in the metadata image (`ClientQuota` records; raft_meta/controller/quota_decisions.py).
Per quota type (`producer_byte_rate` for Produce, `consumer_byte_rate` for consumer Fetch),
each connection's bytes go to a sensor shared by every connection the same quota applies to
(`quota_for`: the first of KIP-55's eight entities that sets the key, e.g. all of a user's
client ids for a user-level quota). Kafka's decisions, followed:

- Nothing is recorded while the cluster has no client quota at all (`quotasEnabled`).
- The bytes are recorded first, then the quota is checked (`Sensor.record(..., checkQuotas)`):
  the request that goes over is answered, with a throttle time.
- The meter is Kafka's `Rate` over a `SampledStat`: `quota.window.num` samples (11) of
  `quota.window.size.seconds` (1); the elapsed time it divides by is at least
  `quota.window.num - 1` whole windows, so a new client may send that many windows' worth
  before it is throttled.
- The throttle time is `(rate - bound) / bound * window` (`QuotaUtils.throttleTime`): how
  long the client must stay silent for the rate over the window to come back to the bound.
  It is capped at the whole sampled window (`quota.window.num * quota.window.size.seconds`).
- The response carries it in `throttle_time_ms` and the connection is muted for that long
  (`ConnectionInfo.muted_until`; broker/net/network.py stops reading it), so a client that does
  not back off is delayed anyway (KIP-219).
- A sensor unused for an hour is dropped (Kafka's `InactiveSensorExpirationTimeSeconds`).

Produce records the request's size; a consumer Fetch records its response's size (a
follower's Fetch is never client-quota'd). A throttled Fetch without a fetch session is
answered empty and its bytes taken back off the meter, as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftka.raft_meta.controller.quota_decisions import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QuotaMap,
    quota_for,
)

SENSOR_EXPIRY_S = 3600.0


class QuotaRate:
    """Kafka's `Rate` over a `SampledStat` (time windows only): `samples` windows of
    `window_s` seconds, recycled in turn; the elapsed time the rate divides by is padded to at
    least `samples - 1` whole windows (`Rate.windowSize`). Times are seconds from a monotonic
    clock, passed in."""

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        if samples < 1 or window_s <= 0:
            raise ValueError(f"samples {samples} and window {window_s}s; expected samples >= 1 and a window > 0")
        self.samples = samples
        self.window_s = window_s
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._starts:
            self._starts.append(now)
            self._values.append(0.0)
        elif now - self._starts[self._current] >= self.window_s:  # complete: the next sample
            self._current = (self._current + 1) % self.samples
            if self._current == len(self._starts):
                self._starts.append(now)
                self._values.append(0.0)
            else:
                self._starts[self._current], self._values[self._current] = now, 0.0
        self._values[self._current] += value

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        for i, start in enumerate(self._starts):
            if now - start >= expire:
                self._starts[i], self._values[i] = now, 0.0

    def window_size(self, now: float) -> float:
        self._purge(now)
        elapsed = now - min(self._starts, default=now)
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return elapsed

    def total(self, now: float) -> float:
        """What the live samples hold (Kafka's `SampledStat` combine for a sum)."""
        self._purge(now)
        return sum(self._values)

    def rate(self, now: float) -> float:
        """Bytes per second (0 before anything was recorded)."""
        window = self.window_size(now)
        return sum(self._values) / window if window > 0 else 0.0


def throttle_time_ms(rate: QuotaRate, bound: float, now: float, cap_ms: float) -> int:
    """0 within the bound, else Kafka's `QuotaUtils.throttleTime`, at most `cap_ms`."""
    value = rate.rate(now)
    if value <= bound:
        return 0
    if bound <= 0:
        return int(cap_ms)
    return int(min(round((value - bound) / bound * rate.window_size(now) * 1000.0), cap_ms))


@dataclass
class QuotaSensor:
    """One (user, client-id) sensor: the byte-rate meter, and Kafka's `throttle-time` (the
    mean throttle time of the throttled responses over the same windows)."""

    rate: QuotaRate
    last_used: float
    bound: float | None = None
    bytes_total: int = 0
    throttle_ms_total: int = 0
    throttled: int = 0
    _throttle_ms: QuotaRate | None = None
    _throttle_count: QuotaRate | None = None

    def throttle_recorded(self, ms: int, now: float) -> None:
        if self._throttle_ms is None or self._throttle_count is None:
            self._throttle_ms = QuotaRate(self.rate.samples, self.rate.window_s)
            self._throttle_count = QuotaRate(self.rate.samples, self.rate.window_s)
        self._throttle_ms.record(ms, now)
        self._throttle_count.record(1, now)
        self.throttled += 1
        self.throttle_ms_total += ms

    def throttle_time_avg(self, now: float) -> float:
        """Kafka's `throttle-time` (an Avg over the windows): 0 when nothing was throttled."""
        if self._throttle_ms is None or self._throttle_count is None:
            return 0.0
        count = self._throttle_count.total(now)
        return self._throttle_ms.total(now) / count if count else 0.0


@dataclass
class ClientQuotaManager:
    """One quota type's sensors (`key` is the quota key, `name` Kafka's metric type)."""

    key: str
    name: str
    samples: int = 11
    window_s: float = 1.0
    sensors: dict[tuple[str, str], QuotaSensor] = field(default_factory=dict)
    _next_expiry: float = 0.0

    @property
    def cap_ms(self) -> float:
        return self.samples * self.window_s * 1000.0

    def record(self, quotas: QuotaMap, user: str, client_id: str, nbytes: int, now: float) -> int:
        """Record `nbytes` for a connection of `user` / `client_id`; the throttle time (ms)."""
        if not quotas:
            return 0
        bound, tags = quota_for(quotas, user, client_id, self.key)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = QuotaSensor(QuotaRate(self.samples, self.window_s), now)
        sensor.last_used, sensor.bound = now, bound
        sensor.rate.record(nbytes, now)
        sensor.bytes_total += nbytes
        self._expire(now)
        if bound is None:
            return 0
        throttle = throttle_time_ms(sensor.rate, bound, now, self.cap_ms)
        if throttle:
            sensor.throttle_recorded(throttle, now)
        return throttle

    def unrecord(self, quotas: QuotaMap, user: str, client_id: str, nbytes: int, now: float) -> None:
        """Take back bytes recorded for an answer that was not sent after all (Kafka's
        `unrecordQuotaSensor`: a throttled Fetch is answered empty)."""
        sensor = self.sensors.get(quota_for(quotas, user, client_id, self.key)[1])
        if sensor is not None:
            sensor.rate.record(-nbytes, now)
            sensor.bytes_total -= nbytes

    def samples_now(self, now: float) -> list[tuple[str, str, float, float]]:
        """(user, client-id, byte-rate, throttle-time) per sensor, for the metrics."""
        return [(user, client_id, s.rate.rate(now), s.throttle_time_avg(now))
                for (user, client_id), s in sorted(self.sensors.items())]

    def _expire(self, now: float) -> None:
        if now < self._next_expiry:
            return
        self._next_expiry = now + 60.0
        for tags in [t for t, s in self.sensors.items() if now - s.last_used >= SENSOR_EXPIRY_S]:
            del self.sensors[tags]


@dataclass
class ClientQuotas:
    """The broker's byte-rate quota managers (Kafka's `QuotaManagers.produce` / `.fetch`)."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager

    @classmethod
    def create(cls, samples: int = 11, window_s: float = 1.0) -> ClientQuotas:
        return cls(ClientQuotaManager(PRODUCER_BYTE_RATE, "Produce", samples, window_s),
                   ClientQuotaManager(CONSUMER_BYTE_RATE, "Fetch", samples, window_s))

    @classmethod
    def from_config(cls, config) -> ClientQuotas:
        return cls.create(config.quota_window_num, float(config.quota_window_size_seconds))


def user_of(principal: str) -> str:
    """The quota user of a `User:<name>` principal (Kafka's `KafkaPrincipal.getName`)."""
    _, sep, name = principal.partition(":")
    return name if sep else principal
