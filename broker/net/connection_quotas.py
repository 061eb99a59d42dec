"""Connection quotas of the Kafka listeners: `max.connections` and `max.connections.per.ip`.

Kafka's rules (kafka.network.ConnectionQuotas), counted over every client
listener of the broker:

- Over `max.connections.per.ip` (or its `max.connections.per.ip.overrides`
  entry) a new connection is closed as soon as it is accepted.
- At `max.connections` the listener stops accepting (new connections wait in
  the kernel's backlog) until a connection closes. The inter-broker listener
  is exempt when the broker has several listeners, so replication keeps
  working while clients fill the others (Kafka then closes another
  listener's least recently used connection; raftka does not).

- KIP-612's `connection_creation_rate` of an ip (a client quota, `--entity-type ips`; the
  ip's own, else the default ip's): every connection accepted from it is counted on the
  ip's sensor (Kafka's Rate over `quota.window.num` windows of `quota.window.size.seconds`);
  one that takes the rate over the quota is held unserved for the throttle time and then
  closed (Kafka's delayed close of a throttled connection).

`ConnectionQuotas` is the counting, with no I/O; `wait_for_slot` is its only
trio part. broker/net/network.py's accept loop drives it and logs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import trio

from raftka.broker.client_quotas import SENSOR_EXPIRY_S, QuotaRate, throttle_time_ms

# Kafka's default for both limits: Integer.MAX_VALUE, i.e. no limit.
UNLIMITED = 2**31 - 1


def normalise_ip(host: str) -> str:
    """The address quotas are counted by: an IPv4-mapped IPv6 peer counts as its IPv4 address,
    so a dual-stack listener counts 127.0.0.1 and ::ffff:127.0.0.1 together."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # normalised ip -> limit
    protected_listener: str | None = None  # exempt from max_connections (the inter-broker one)

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)


@dataclass(frozen=True)
class Refusal:
    """Why a just-accepted connection is closed at once."""

    reason: str
    ip: str
    limit: int

    def __str__(self) -> str:
        return f"{self.ip} already has {self.limit} connection(s), the {self.reason} limit"


class ConnectionQuotas:
    """Open connections per IP and in total, against `ConnectionLimits`."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self._per_ip: dict[str, int] = {}
        self._slot_freed = trio.lowlevel.ParkingLot()
        # KIP-612: an ip's connection_creation_rate (None: unlimited); the node points it at
        # the metadata image (raft_meta/client_quotas.ip_connection_rate).
        self.ip_rate: Callable[[str], float | None] = lambda ip: None
        self.rate_samples, self.rate_window_s = 11, 1.0
        self._ip_sensors: dict[str, tuple[QuotaRate, float]] = {}  # ip -> (sensor, last used)
        self._next_expiry = 0.0

    def creation_throttle_ms(self, ip: str, now: float) -> int:
        """Count a connection just admitted from `ip` against its connection_creation_rate;
        how long to hold it before closing it (0: serve it)."""
        bound = self.ip_rate(ip)
        if bound is None:
            return 0
        sensor = self._ip_sensors.get(ip, (None, 0.0))[0] or QuotaRate(self.rate_samples, self.rate_window_s)
        self._ip_sensors[ip] = (sensor, now)
        sensor.record(1, now)
        if now >= self._next_expiry:
            self._next_expiry = now + 60.0
            for stale in [i for i, (_, used) in self._ip_sensors.items() if now - used >= SENSOR_EXPIRY_S]:
                del self._ip_sensors[stale]
        return throttle_time_ms(sensor, bound, now, self.rate_samples * self.rate_window_s * 1000.0)

    def count(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def slot_available(self, listener: str) -> bool:
        """May `listener` accept one more connection (the broker-wide limit)?"""
        return listener == self.limits.protected_listener or self.total < self.limits.max_connections

    def admit(self, ip: str) -> Refusal | None:
        """Count a connection just accepted from `ip`; a Refusal (nothing counted) if `ip` is at
        its limit."""
        count = self._per_ip.get(ip, 0)
        limit = self.limits.limit_for(ip)
        if count >= limit:
            return Refusal("max.connections.per.ip", ip, limit)
        self._per_ip[ip] = count + 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        """A connection admitted from `ip` closed."""
        count = self._per_ip[ip] - 1
        if count:
            self._per_ip[ip] = count
        else:
            del self._per_ip[ip]
        self.total -= 1
        if self._slot_freed:
            self._slot_freed.unpark_all()

    async def wait_for_slot(self, listener: str) -> None:
        """Return once `listener` may accept another connection."""
        while not self.slot_available(listener):
            await self._slot_freed.park()
