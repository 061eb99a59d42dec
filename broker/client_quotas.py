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

`request_percentage` (KIP-124, Kafka's ClientRequestQuotaManager): every request but the
exempt ones (a follower's Fetch, WriteTxnMarkers: inter-broker) records the time its handler
spent running, as a percentage of one second (`RequestTimer`: the connection task's own
steps, so waiting for the controller or in a fetch's long poll does not count), on the
`Request` sensor; the quota is a percentage of one handler thread. Its throttle time is the
same formula, capped at one window (`quota.window.size.seconds`), not the whole sampled
window. Produce and Fetch take the larger of their byte-rate and request throttles.

`controller_mutation_rate` (KIP-599, Kafka's ControllerMutationQuotaManager): partitions
created (CreateTopics, CreatePartitions) or deleted (DeleteTopics) per second, on a token
bucket (`TokenBucket`) of `controller.quota.window.num * controller.quota.window.size.seconds`
seconds' worth of the rate, full at first. `MutationQuota` is one request's view of it: strict
from CreateTopics v6, CreatePartitions v3, DeleteTopics v5 (a topic is refused with
THROTTLING_QUOTA_EXCEEDED while the bucket is below zero, and accepted, however many its
partitions, while it is not), permissive before (always accepted, the response throttled).
The throttle time is the time the bucket needs to come back to zero.

Each quota type is only metered while some entity sets its key (Kafka's `quotasEnabled`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter

import trio

from raftka.raft_meta.controller.quota_decisions import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
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


class TokenBucket:
    """Kafka's `TokenBucket` stat (KIP-599): `rate` tokens a second flow in, up to a burst of
    `samples * window_s` seconds' worth; the bucket starts full and a recording takes its value
    out, below zero if need be. Times are seconds from a monotonic clock."""

    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, samples: int, window_s: float, now: float) -> None:
        self.rate, self.burst = rate, samples * window_s * rate
        self.tokens, self.last = self.burst, now

    def set_rate(self, rate: float, samples: int, window_s: float) -> None:
        """The quota changed (Kafka updates the metric's config in place: tokens stay)."""
        self.rate, self.burst = rate, samples * window_s * rate

    def level(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + self.rate * max(0.0, now - self.last))
        self.last = max(self.last, now)
        return self.tokens

    def take(self, value: float, now: float) -> None:
        self.tokens = min(self.burst, self.level(now) - value)

    def throttle_ms(self, now: float) -> int:
        """0 while the bucket is not below zero, else the time it needs to get back to zero
        (`ControllerMutationQuotaManager.throttleTimeMs`)."""
        tokens = self.level(now)
        return round(-tokens / self.rate * 1000.0) if tokens < 0 else 0


@dataclass
class QuotaSensor:
    """One (user, client-id) sensor: the byte-rate meter, and Kafka's `throttle-time` (the
    mean throttle time of the throttled responses over the same windows)."""

    rate: QuotaRate
    last_used: float
    bound: float | None = None
    bytes_total: float = 0  # bytes; request-time: percent-seconds; mutations: partitions
    throttle_ms_total: int = 0
    throttled: int = 0
    bucket: TokenBucket | None = None  # controller_mutation_rate's
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
    """One quota type's sensors (`key` is the quota key, `name` Kafka's metric type, `metric`
    its rate metric; `max_throttle_ms` caps throttles, the whole sampled window if None)."""

    key: str
    name: str
    samples: int = 11
    window_s: float = 1.0
    metric: str = "byte-rate"
    max_throttle_ms: float | None = None
    sensors: dict[tuple[str, str], QuotaSensor] = field(default_factory=dict)
    _next_expiry: float = 0.0
    _seen: object = None  # the quota map `_enabled` was worked out for
    _enabled: bool = False

    @property
    def cap_ms(self) -> float:
        return self.samples * self.window_s * 1000.0 if self.max_throttle_ms is None else self.max_throttle_ms

    def enabled(self, quotas: QuotaMap) -> bool:
        """Whether any entity sets this type's key (Kafka's `quotasEnabled`); worked out once
        per metadata image's quota map."""
        if quotas is not self._seen:
            self._seen, self._enabled = quotas, any(self.key in values for values in quotas.values())
        return self._enabled

    def _sensor(self, quotas: QuotaMap, user: str, client_id: str, now: float) -> QuotaSensor:
        bound, tags = quota_for(quotas, user, client_id, self.key)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = QuotaSensor(QuotaRate(self.samples, self.window_s), now)
        sensor.last_used, sensor.bound = now, bound
        self._expire(now)
        return sensor

    def record(self, quotas: QuotaMap, user: str, client_id: str, nbytes: float, now: float) -> int:
        """Record `nbytes` for a connection of `user` / `client_id`; the throttle time (ms)."""
        if not quotas or not self.enabled(quotas):
            return 0
        sensor = self._sensor(quotas, user, client_id, now)
        bound = sensor.bound
        sensor.rate.record(nbytes, now)
        sensor.bytes_total += nbytes
        if bound is None:
            return 0
        throttle = throttle_time_ms(sensor.rate, bound, now, self.cap_ms)
        if throttle:
            sensor.throttle_recorded(throttle, now)
        return throttle

    def unrecord(self, quotas: QuotaMap, user: str, client_id: str, nbytes: int, now: float) -> None:
        """Take back bytes recorded for an answer that was not sent after all (Kafka's
        `unrecordQuotaSensor`: a throttled Fetch is answered empty)."""
        sensor = self.sensors.get(quota_for(quotas, user, client_id, self.key)[1]) if quotas else None
        if sensor is not None:
            sensor.rate.record(-nbytes, now)
            sensor.bytes_total -= nbytes

    def mutation_quota(self, quotas: QuotaMap, user: str, client_id: str, strict: bool,
                       now: float) -> MutationQuota:
        """One request's controller mutation quota (Kafka's `newQuotaFor`): unbounded while
        no entity sets the key or none applies to this connection."""
        if not quotas or not self.enabled(quotas):
            return MutationQuota(None, strict)
        sensor = self._sensor(quotas, user, client_id, now)
        if sensor.bound is None:
            return MutationQuota(None, strict)
        if sensor.bucket is None:
            sensor.bucket = TokenBucket(sensor.bound, self.samples, self.window_s, now)
        elif sensor.bucket.rate != sensor.bound:
            sensor.bucket.set_rate(sensor.bound, self.samples, self.window_s)
        return MutationQuota(sensor, strict)

    def samples_now(self, now: float) -> list[tuple[str, str, float, float]]:
        """(user, client-id, byte-rate, throttle-time) per sensor, for the metrics."""
        return [(user, client_id, s.rate.rate(now), s.throttle_time_avg(now))
                for (user, client_id), s in sorted(self.sensors.items())]

    def tokens_now(self, now: float) -> list[tuple[str, str, float]]:
        """(user, client-id, tokens left) per token bucket (controller_mutation_rate's)."""
        return [(user, client_id, s.bucket.level(now)) for (user, client_id), s in sorted(self.sensors.items())
                if s.bucket is not None]

    def _expire(self, now: float) -> None:
        if now < self._next_expiry:
            return
        self._next_expiry = now + 60.0
        for tags in [t for t, s in self.sensors.items() if now - s.last_used >= SENSOR_EXPIRY_S]:
            del self.sensors[tags]


@dataclass
class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict- / PermissiveControllerMutationQuota;
    `sensor` None: unbounded)."""

    sensor: QuotaSensor | None
    strict: bool
    _throttle_ms: int = 0
    _throttled_at: float = 0.0

    def record(self, partitions: int, now: float) -> bool:
        """Record `partitions` mutations; False: refused (THROTTLING_QUOTA_EXCEEDED), which
        only a strict quota does, and only while the bucket is already below zero."""
        sensor = self.sensor
        if sensor is None or sensor.bucket is None:
            return True
        bucket = sensor.bucket
        if self.strict:
            throttle = bucket.throttle_ms(now)
            if throttle:
                self._throttle_ms, self._throttled_at = throttle, now
                return False
        bucket.take(partitions, now)
        sensor.rate.record(partitions, now)
        sensor.bytes_total += partitions
        sensor.last_used = now
        if not self.strict:
            throttle = bucket.throttle_ms(now)
            if throttle:
                self._throttle_ms, self._throttled_at = throttle, now
        return True

    def throttle_time_ms(self, now: float) -> int:
        """The throttle time for the response: the last one worked out, less the time since."""
        if not self._throttle_ms:
            return 0
        return max(0, int(self._throttle_ms - (now - self._throttled_at) * 1000.0))


# Kafka's strict-since versions (KIP-599): older versions are throttled, never refused.
STRICT_MUTATION_VERSIONS = {"CreateTopics": 6, "CreatePartitions": 3, "DeleteTopics": 5}


@dataclass
class ClientQuotas:
    """The broker's client quota managers (Kafka's `QuotaManagers.produce`, `.fetch`,
    `.request` and `.controllerMutation`)."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager = field(default_factory=lambda: ClientQuotaManager(
        REQUEST_PERCENTAGE, "Request", metric="request-time", max_throttle_ms=1000.0))
    mutation: ClientQuotaManager = field(default_factory=lambda: ClientQuotaManager(
        CONTROLLER_MUTATION_RATE, "ControllerMutation", metric="mutation-rate"))
    timer: RequestTimer = field(default_factory=lambda: RequestTimer())

    @classmethod
    def create(cls, samples: int = 11, window_s: float = 1.0, mutation_samples: int = 11,
               mutation_window_s: float = 1.0) -> ClientQuotas:
        return cls(ClientQuotaManager(PRODUCER_BYTE_RATE, "Produce", samples, window_s),
                   ClientQuotaManager(CONSUMER_BYTE_RATE, "Fetch", samples, window_s),
                   ClientQuotaManager(REQUEST_PERCENTAGE, "Request", samples, window_s, metric="request-time",
                                      max_throttle_ms=window_s * 1000.0),
                   ClientQuotaManager(CONTROLLER_MUTATION_RATE, "ControllerMutation", mutation_samples,
                                      mutation_window_s, metric="mutation-rate"))

    @classmethod
    def from_config(cls, config) -> ClientQuotas:
        return cls.create(config.quota_window_num, float(config.quota_window_size_seconds),
                          config.controller_quota_window_num, float(config.controller_quota_window_size_seconds))

    @property
    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.mutation)


class RequestTimer(trio.abc.Instrument):
    """The time a task spends running (its trio steps) between `start` and `stop`: Kafka's
    request handler thread time, for the request quota. It is a trio instrument only while
    `request_percentage` is set somewhere (`ensure`), so an unquota'd broker pays nothing per
    step."""

    def __init__(self, clock: Callable[[], float] = perf_counter) -> None:
        self.busy: dict[object, float] = {}
        self.installed = False
        self._clock = clock
        self._step_start = 0.0

    def ensure(self, wanted: bool) -> None:
        if wanted != self.installed:
            if wanted:
                trio.lowlevel.add_instrument(self)
            else:
                with contextlib.suppress(KeyError):  # a trio run that never had it
                    trio.lowlevel.remove_instrument(self)
            self.installed = wanted

    def before_task_step(self, task) -> None:
        self._step_start = self._clock()

    def after_task_step(self, task) -> None:
        if task in self.busy:
            self.busy[task] += self._clock() - self._step_start

    def start(self) -> None:
        self.busy[trio.lowlevel.current_task()] = 0.0
        self._step_start = self._clock()  # this step counts from now

    def stop(self) -> float:
        """Seconds the current task ran since `start`."""
        return self.busy.pop(trio.lowlevel.current_task(), 0.0) + self._clock() - self._step_start


def user_of(principal: str) -> str:
    """The quota user of a `User:<name>` principal (Kafka's `KafkaPrincipal.getName`)."""
    _, sep, name = principal.partition(":")
    return name if sep else principal
