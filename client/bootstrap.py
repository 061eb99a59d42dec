"""`bootstrap.servers` as (host, port) pairs: plain parsing, no I/O and no trio, so
option validation (e.g. the Spark source's, in a fresh Python worker) stays cheap."""

from __future__ import annotations

from collections.abc import Iterable


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """`"h1:9092,h2:9093"` (or a list of such) as [(host, port)]. IPv6 hosts go in
    brackets (`[::1]:9092`). Raises ValueError naming the bad entry."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        entry = raw.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"bootstrap server {entry!r} is not host:port (e.g. 127.0.0.1:9092)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"bootstrap_servers {servers!r} names no host:port")
    return out
