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

`ConnectionQuotas` is the counting, with no I/O; `wait_for_slot` is its only
trio part. broker/network.py's accept loop drives it and logs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

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
