"""The simulated network and clock every simulated voter shares.

`Scheduler`: a simulated clock (integer microseconds) and a queue of events. An event's key
is `(time, kind, a, b, n)` built from things the simulation decides deterministically -- never
from the order in which pysyncobj iterates a `set` of nodes, which depends on the process's
hash seed -- so a seed replays exactly in any process.

`SimNetwork`: links between voters through pysyncobj's `transportClass` hook (`SimTransport`).
Every ordered link has its own random generator (seeded from the run seed and the link), so a
message's fate depends only on the messages sent before it on the same link. Faults, all
seeded: drops, delays, duplicates, reordering (deliveries not in send order), one-way cuts,
two-way partitions and connection resets (in-flight messages lost, both ends told the peer
disconnected, reconnection after `reconnect_us`).
"""

from __future__ import annotations

import heapq
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pysyncobj.syncobj as pysyncobj_syncobj
from pysyncobj.transport import Transport

# --- the clock pysyncobj reads -------------------------------------------------------------
# pysyncobj.syncobj reads time through its module-level `monotonicTime`. The simulation
# replaces it, once, by a function that returns the simulated time on a thread that runs a
# simulation and the real monotonic time on every other thread (a real voter in the same
# process is unaffected).
_real_monotonic = pysyncobj_syncobj.monotonicTime
_local = threading.local()


def _monotonic() -> float:
    try:  # pysyncobj reads the clock several times per tick: the simulated case first
        return _local.scheduler.now_us / 1e6
    except AttributeError:  # no scheduler on this thread (never installed, or None)
        return _real_monotonic()


def install_clock(scheduler: Scheduler | None) -> None:
    """Make pysyncobj read `scheduler`'s time on this thread (None: real time again)."""
    if pysyncobj_syncobj.monotonicTime is not _monotonic:
        pysyncobj_syncobj.monotonicTime = _monotonic
    _local.scheduler = scheduler


class Scheduler:
    """Events are `(time, kind, a, b, n, action, args)`; the key `(time, kind, a, b, n)` is unique
    (so `action` is never compared) and `action(*args)` runs the event."""

    def __init__(self) -> None:
        self.now_us = 0
        self._queue: list[tuple] = []
        self._n = 0
        self.sent_in_step = 0  # messages sent by the current event (a busy loop's guard)
        self.trace: Callable[[tuple], None] | None = None  # sees each event before it runs (fingerprint.py)
        self.steps = 0  # events run by run_until

    def at(self, time_us: int, kind: int, a: str, b: str, n: int, action: Callable[..., None], *args) -> None:
        heapq.heappush(self._queue, (time_us, kind, a, b, n, action, args))

    def later(self, delay_us: int, action: Callable[[], None]) -> None:
        """An event of the simulation itself (faults, clients): ordered by when it was scheduled."""
        self._n += 1
        self.at(self.now_us + delay_us, 0, "", "", self._n, action)

    def step(self) -> bool:
        if not self._queue:
            return False
        self.sent_in_step = 0
        event = heapq.heappop(self._queue)
        if self.trace is not None:
            self.trace(event)
        if event[0] > self.now_us:
            self.now_us = event[0]
        event[5](*event[6])
        return True

    def run_until(self, until_us: int, done: Callable[[], bool] | None = None) -> bool:
        """`step()` until the next event is after `until_us` (the clock then reads `until_us`) or
        `done()` holds after a step (True), counting the steps in `steps`."""
        queue, pop, trace = self._queue, heapq.heappop, self.trace
        steps = 0
        try:
            while queue and queue[0][0] <= until_us:
                self.sent_in_step = 0
                event = pop(queue)
                if trace is not None:
                    trace(event)
                if event[0] > self.now_us:
                    self.now_us = event[0]
                event[5](*event[6])
                steps += 1
                if done is not None and done():
                    return True
            self.now_us = until_us
            return done is not None and done()
        finally:
            self.steps += steps

    def next_time(self) -> int | None:
        return self._queue[0][0] if self._queue else None


MAX_SENT_PER_STEP = 10_000


class RunawayStep(AssertionError):
    """A voter loops on sends within one step (time does not pass inside a step)."""


@dataclass
class NetworkProfile:
    """One seed's network; probabilities per message."""

    drop: float = 0.0
    duplicate: float = 0.0
    reorder: bool = False
    delay_min_us: int = 200
    delay_max_us: int = 5_000
    reconnect_us: int = 500_000  # SyncObjConf.connectionRetryTime as raftka sets it


class _Link:
    def __init__(self, seed: int, a: str, b: str) -> None:
        self.rng = random.Random(f"{seed}:{a}->{b}")
        self.sent = 0
        self.last_delivery = 0


class SimNetwork:
    def __init__(self, scheduler: Scheduler, seed: int, profile: NetworkProfile) -> None:
        self.scheduler = scheduler
        self.seed = seed
        self.profile = profile
        self.transports: dict[str, SimTransport] = {}
        self.cut: set[tuple[str, str]] = set()  # (a, b): a's messages to b are lost
        self.generation: dict[frozenset, int] = {}  # a connection's incarnation; bumps on a reset
        self.connected: set[frozenset] = set()
        self.links: dict[tuple[str, str], _Link] = {}
        self.on_delivered: Callable[[str], None] = lambda node: None
        self.on_send: Callable[[str, str, dict], None] | None = None  # the checker's look at what leaves a node
        self.delivered = 0
        self._pairs: dict[tuple[str, str], frozenset] = {}

    def _pair(self, a: str, b: str) -> frozenset:
        pair = self._pairs.get((a, b))
        if pair is None:
            pair = self._pairs[(a, b)] = self._pairs[(b, a)] = frozenset((a, b))
        return pair

    def _link(self, a: str, b: str) -> _Link:
        link = self.links.get((a, b))
        if link is None:
            link = self.links[(a, b)] = _Link(self.seed, a, b)
        return link

    # --- endpoints ---
    def attach(self, transport: SimTransport) -> None:
        self.transports[transport.self_id] = transport
        for peer in sorted(self.transports):
            if peer != transport.self_id:
                self._schedule_connect(transport.self_id, peer)

    def detach(self, node: str) -> None:
        self.transports.pop(node, None)
        for peer in sorted(self.transports):
            self._disconnect(frozenset((node, peer)))

    # --- faults ---
    def partition(self, a: str, b: str, one_way: bool) -> None:
        self.cut.add((a, b))
        if not one_way:
            self.cut.add((b, a))
            self._disconnect(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        self.cut.discard((a, b))
        self.cut.discard((b, a))
        pair = frozenset((a, b))
        if pair not in self.connected and a in self.transports and b in self.transports:
            self._schedule_connect(a, b)

    def heal_all(self) -> None:
        for a, b in sorted(self.cut):
            self.heal(a, b)

    def reset(self, a: str, b: str) -> None:
        """A connection reset: both ends see the peer disconnect; they reconnect later."""
        pair = frozenset((a, b))
        if pair in self.connected:
            self._disconnect(pair)
            self._schedule_connect(a, b)

    def _disconnect(self, pair: frozenset) -> None:
        self.generation[pair] = self.generation.get(pair, 0) + 1  # in-flight messages are lost
        if pair in self.connected:
            self.connected.discard(pair)
            for node in sorted(pair):
                transport = self.transports.get(node)
                if transport is not None:
                    transport.peer_disconnected(next(iter(pair - {node})))

    def _schedule_connect(self, a: str, b: str) -> None:
        pair = frozenset((a, b))
        generation = self.generation.get(pair, 0)
        lo, hi = sorted(pair)
        link = self._link(lo, hi)
        delay = self.profile.reconnect_us + link.rng.randint(0, self.profile.reconnect_us // 2)

        def connect() -> None:
            if (self.generation.get(pair, 0) != generation or pair in self.connected or lo not in self.transports
                    or hi not in self.transports or (lo, hi) in self.cut and (hi, lo) in self.cut):
                return
            self.connected.add(pair)
            self.transports[lo].peer_connected(hi)
            self.transports[hi].peer_connected(lo)
            self.on_delivered(lo)
            self.on_delivered(hi)

        link.sent += 1
        self.scheduler.at(self.scheduler.now_us + delay, 1, lo, hi, -link.sent, connect)

    # --- messages ---
    def send(self, a: str, b: str, message: dict) -> bool:
        pair = self._pairs.get((a, b)) or self._pair(a, b)
        if pair not in self.connected:
            return False
        if self.on_send is not None:
            self.on_send(a, b, message)
        scheduler = self.scheduler
        scheduler.sent_in_step += 1
        if scheduler.sent_in_step > MAX_SENT_PER_STEP:
            raise RunawayStep(f"{a} sent more than {MAX_SENT_PER_STEP} messages in one step (a busy loop; "
                              f"last: {message.get('type')})")
        link = self.links.get((a, b)) or self._link(a, b)
        rng, profile = link.rng, self.profile
        copies = 2 if profile.duplicate and rng.random() < profile.duplicate else 1
        for _ in range(copies):
            link.sent += 1
            if (a, b) in self.cut or (profile.drop and rng.random() < profile.drop):
                continue
            when = scheduler.now_us + rng.randint(profile.delay_min_us, profile.delay_max_us)
            if not profile.reorder:
                when = max(when, link.last_delivery)  # FIFO, as on one TCP connection
            link.last_delivery = when
            scheduler.at(when, 2, a, b, link.sent, self._deliver, a, b, message, self.generation.get(pair, 0))
        return True

    def _deliver(self, a: str, b: str, message: dict, generation: int) -> None:
        pair = self._pairs[(a, b)]
        if self.generation.get(pair, 0) != generation or pair not in self.connected:
            return
        transport = self.transports.get(b)
        if transport is None:
            return
        self.delivered += 1
        transport.receive(a, message)
        self.on_delivered(b)


class SimTransport(Transport):
    """pysyncobj's transport over a `SimNetwork` (SyncObj(..., transportClass=partial(SimTransport, network=n)))."""

    def __init__(self, syncObj, selfNode, otherNodes, *, network: SimNetwork) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        self.self_id = selfNode.id
        self.network = network
        self.peers = {node.id: node for node in otherNodes}
        network.attach(self)

    ready = True  # read twice per tick: a plain attribute, not Transport's property

    def send(self, node, message):
        return self.network.send(self.self_id, node.id, message)

    def receive(self, sender: str, message: dict) -> None:
        if self._onMessageReceivedCallback is not None:  # as Transport._onMessageReceived
            self._onMessageReceivedCallback(self.peers[sender], message)

    def peer_connected(self, peer: str) -> None:
        self._onNodeConnected(self.peers[peer])

    def peer_disconnected(self, peer: str) -> None:
        self._onNodeDisconnected(self.peers[peer])

    def destroy(self):
        self.network.detach(self.self_id)
