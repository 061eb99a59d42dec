"""Is a broker process still there? A TCP connect to its advertised listeners.

The controller uses this as a hint to fence a crashed broker long before its
session expires. Only one answer counts as proof: **connection refused** at
every address the broker registered means nothing listens where it said it
would, so its process is gone (or never re-opened its port). Anything else
proves nothing and leaves the decision to the session timeout: a connect that
succeeds (a SIGSTOPped process's kernel still completes handshakes into the
listen backlog), a timeout (a partition, a firewall that drops), an unreachable
host or a name that does not resolve.
"""

from __future__ import annotations

import enum
import errno
from collections.abc import Iterable

import trio

# Hosts that do not name one machine: connecting to them from the controller would test
# the controller's own machine, not the broker's.
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


class Reachability(enum.Enum):
    LISTENING = "listening"  # something accepted the connection
    REFUSED = "refused"  # nothing listens there: the process is gone
    UNKNOWN = "unknown"  # timeout, unreachable, unresolvable, wildcard host: proves nothing


async def _connect_once(family: int, socktype: int, proto: int, address: tuple) -> Reachability:
    sock = trio.socket.socket(family, socktype, proto)
    try:
        await sock.connect(address)
        return Reachability.LISTENING
    except ConnectionRefusedError:
        return Reachability.REFUSED
    except OSError as exc:
        # ECONNREFUSED can also surface as a bare OSError on some platforms.
        return Reachability.REFUSED if exc.errno == errno.ECONNREFUSED else Reachability.UNKNOWN
    finally:
        sock.close()


async def probe_endpoint(host: str, port: int, timeout_s: float) -> Reachability:
    """Connect to every address `host` resolves to, within `timeout_s` in all.

    LISTENING if any address accepts, REFUSED only if every one refuses, else UNKNOWN.
    Never raises for network trouble (only cancellation propagates).
    """
    if host in _WILDCARD_HOSTS:
        return Reachability.UNKNOWN
    results: list[Reachability] = []
    with trio.move_on_after(timeout_s):
        try:
            infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
        except OSError:
            return Reachability.UNKNOWN
        for family, socktype, proto, _, address in infos:
            result = await _connect_once(family, socktype, proto, address)
            if result is Reachability.LISTENING:
                return result
            results.append(result)
        return _verdict(results)
    return Reachability.UNKNOWN


async def probe_listeners(listeners: Iterable[tuple[str, str, int]], timeout_s: float) -> Reachability:
    """Probe a broker's registered (listener name, host, port) endpoints, one after another.

    REFUSED only if there is at least one endpoint and every one refuses; LISTENING if any
    accepts; else UNKNOWN. `timeout_s` applies to each endpoint.
    """
    results = []
    for _, host, port in listeners:
        result = await probe_endpoint(host, port, timeout_s)
        if result is Reachability.LISTENING:
            return result
        results.append(result)
    return _verdict(results)


def _verdict(results: list[Reachability]) -> Reachability:
    """No endpoint listened: REFUSED if there was one and every one refused, else UNKNOWN."""
    if results and all(r is Reachability.REFUSED for r in results):
        return Reachability.REFUSED
    return Reachability.UNKNOWN
