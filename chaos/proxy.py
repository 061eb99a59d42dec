"""Fault-injecting TCP proxies in front of every node's ports, on their own trio thread.

Each proxy listens where the cluster believes a node's port is and forwards to
where the node really listens. On accept it asks the kernel which process
dialled (chaos/socket_owner.py) to learn the source node ("client" for anyone
else, e.g. the workload). A partition is a set of blocked {a, b} pairs:

* `cut`: existing connections between blocked pairs are closed at once and
  new ones are closed on accept (a refused/reset link);
* `blackhole`: nothing is forwarded between blocked pairs until the heal — the
  bytes wait in the kernel like packets a real network keeps retransmitting.

Links are symmetric: one TCP connection carries both directions (pysyncobj
dials only peers with a smaller address and talks both ways on it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
import trio

from raftka.chaos.socket_owner import connection_owner

log = structlog.get_logger("chaos.proxy")

CLIENT = "client"
# A connection whose dialler could not be identified. Treating it as a client let a
# follower's fetches cross a cut (seen: an isolated leader's writes reached a follower).
UNKNOWN = "unknown"
OWNER_LOOKUPS = 20
OWNER_RETRY_S = 0.005
Source = int | str
MODES = ("cut", "blackhole")
KINDS = ("data", "raft")


@dataclass(frozen=True)
class Route:
    name: str  # e.g. "n2.client", "n2.raft"
    node_id: int
    kind: str  # "data" (Kafka clients and replica fetchers) or "raft" (the metadata quorum)
    listen: tuple[str, int]
    target: tuple[str, int]


@dataclass(eq=False)
class _Link:
    source: Source
    dest: int
    kind: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class ProxyNet:
    """All proxies of one cluster. Thread-safe control from any thread via the public methods."""

    def __init__(self, pid_to_node: Callable[[], dict[int, int]]) -> None:
        self._pid_to_node = pid_to_node
        self._routes: list[Route] = []
        self._blocked: set[frozenset[Source]] = set()
        self._mode = "cut"
        self._kinds: frozenset[str] = frozenset(KINDS)
        self._links: set[_Link] = set()
        self._healed: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self.connections = 0

    # --- control (any thread) -------------------------------------------------
    def add(self, route: Route) -> None:
        if self._thread is not None:
            raise RuntimeError(f"route {route.name} added after start; expected every route before start()")
        self._routes.append(route)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chaos-proxies", daemon=True)
        self._thread.start()
        self._started.wait(10)
        if self._error is not None:
            raise self._error
        if self._token is None:
            raise RuntimeError("the proxies did not start within 10 s")

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(10)

    def partition(self, pairs: set[frozenset[Source]], mode: str = "cut",
                  kinds: frozenset[str] = frozenset(KINDS)) -> None:
        """Block every {a, b} pair in `pairs` on routes of `kinds` (replacing any earlier partition)."""
        if mode not in MODES:
            raise ValueError(f"partition mode {mode!r}; expected one of {MODES}")
        if not kinds or not set(kinds) <= set(KINDS):
            raise ValueError(f"partition kinds {sorted(kinds)}; expected a non-empty subset of {KINDS}")
        self._call(self._apply, {frozenset(p) for p in pairs}, mode, frozenset(kinds))

    def heal(self) -> None:
        self._call(self._apply, set(), self._mode, frozenset(KINDS))

    def blocked(self) -> set[frozenset[Source]]:
        return set(self._blocked)

    def _call(self, fn: Callable, *args) -> None:
        if self._token is None:
            raise RuntimeError("the proxies are not running")
        trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    # --- the trio side ----------------------------------------------------------
    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start() or logged: the thread must not die silently
            self._error = exc
            log.error("chaos.proxy_crashed", error=repr(exc))
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        self._healed = trio.Event()
        self._healed.set()
        async with trio.open_nursery() as nursery:
            for route in self._routes:
                listeners = await trio.open_tcp_listeners(route.listen[1], host=route.listen[0])
                for listener in listeners:
                    nursery.start_soon(self._accept_loop, listener, route)
            self._started.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def _apply(self, blocked: set[frozenset[Source]], mode: str, kinds: frozenset[str]) -> None:
        self._blocked, self._mode, self._kinds = blocked, mode, kinds
        assert self._healed is not None
        if not blocked:
            self._healed.set()
        elif self._healed.is_set():
            self._healed = trio.Event()
        if mode == "cut":
            for link in list(self._links):
                if self._is_blocked(link):
                    link.scope.cancel()
        log.info("chaos.partition", blocked=[sorted(map(str, p)) for p in blocked], mode=mode, kinds=sorted(kinds))

    def _is_blocked(self, link: _Link) -> bool:
        if link.kind not in self._kinds:
            return False
        if link.source == UNKNOWN:  # fail closed: it may be a node on the other side of a cut
            return any(link.dest in pair for pair in self._blocked)
        return frozenset((link.source, link.dest)) in self._blocked

    async def _source_of(self, stream: trio.SocketStream) -> Source:
        """The node that dialled (CLIENT for the harness or any other process); UNKNOWN when
        /proc does not show the connection's owner even after a few tries."""
        peer = stream.socket.getpeername()[:2]
        us = stream.socket.getsockname()[:2]
        for _ in range(OWNER_LOOKUPS):
            nodes = self._pid_to_node()
            pid = connection_owner(peer, us, [*nodes, os.getpid()])
            if pid is not None:
                return nodes.get(pid, CLIENT)
            await trio.sleep(OWNER_RETRY_S)  # the dialler's fd may not be visible in /proc yet
        return UNKNOWN

    async def _accept_loop(self, listener: trio.SocketListener, route: Route) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._serve, stream, route)

    async def _serve(self, inbound: trio.SocketStream, route: Route) -> None:
        link = _Link(await self._source_of(inbound), route.node_id, route.kind)
        self.connections += 1
        try:
            with link.scope:
                if self._is_blocked(link) and self._mode == "cut":
                    return
                await self._wait_open(link)
                try:
                    outbound = await trio.open_tcp_stream(*route.target)
                except OSError:
                    return  # the node is down: the dialler sees its connection close
                self._links.add(link)
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._pump, inbound, outbound, link, nursery.cancel_scope)
                        nursery.start_soon(self._pump, outbound, inbound, link, nursery.cancel_scope)
                finally:
                    self._links.discard(link)
                    await _close(outbound)
        finally:
            await _close(inbound)

    async def _wait_open(self, link: _Link) -> None:
        while self._is_blocked(link):
            assert self._healed is not None
            await self._healed.wait()

    async def _pump(self, src: trio.SocketStream, dst: trio.SocketStream, link: _Link,
                    done: trio.CancelScope) -> None:
        try:
            while True:
                data = await src.receive_some(65536)
                if not data:
                    break
                await self._wait_open(link)
                await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            done.cancel()


async def _close(stream: trio.SocketStream) -> None:
    with trio.CancelScope(shield=True):
        try:
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
