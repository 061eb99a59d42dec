"""Nemeses: a reproducible fault schedule (pure, from a seed) and the code that carries it out.

The schedule alternates healthy gaps and faults of `interval` seconds each:
each fault starts, holds for `interval`, then is undone (restart, resume, heal)
before the next one. `kill` is SIGKILL (a crash); `restart` is the operator's
clean stop (SIGTERM: controlled shutdown) and, at the undo, start again. Targets that only exist at run time (the partition leader,
the controller) are resolved when the fault starts; everything else is drawn
from the seed, so the same seed gives the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import structlog
import trio

from raftka.chaos.cluster import ProxiedCluster
from raftka.chaos.corruption import Corruption, closed_segments, corrupt_segment, detection_in_log
from raftka.chaos.metadata_probe import direct_config, raft_leader
from raftka.chaos.proxy import CLIENT
from raftka.chaos.proxy import KINDS as PROXY_KINDS
from raftka.chaos.workload import Recorder
from raftka.client.admin import AsyncAdmin

log = structlog.get_logger("chaos.nemesis")

KINDS = ("kill", "pause", "partition", "restart", "leader-kill", "controller-kill", "isolate-leader-then-kill",
         "corrupt", "quorum", "txn-coordinator-kill")
# The transactional id whose coordinator (the leader of its __transaction_state partition)
# txn-coordinator-kill kills: the txn workload's first producer (chaos/txn_workload.py).
TXN_COORDINATOR_OF = "chaos-txn-0"
# What the quorum nemesis does to the Raft leader of the metadata quorum (drawn from the seed).
QUORUM_ACTIONS = ("kill", "pause", "isolate")
# How the corrupt nemesis damages a closed segment, and how it stops the node first.
CORRUPTIONS = ("flip", "truncate")
STOPS = ("term", "kill")
CLOSED_SEGMENT_WAIT_S = 20.0  # how long a corrupt fault waits for its victim to close a segment
PROCESS_FREE = frozenset({"none"})  # faults an --against run can inject (no process control)


@dataclass(frozen=True)
class Fault:
    id: int
    kind: str
    start: float  # seconds into the fault window
    duration: float
    nodes: tuple[int, ...] = ()  # for kill / pause / partition: the victims (one side of a partition)
    variant: str = ""  # corrupt: "<flip|truncate>/<term|kill>"; quorum: kill | pause | isolate
    seed: int = 0  # corrupt: picks the partition, segment, batch and bit


def parse_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    for k in kinds:
        if k not in (*KINDS, "none"):
            raise ValueError(f"nemesis {k!r}; expected a comma list of {', '.join((*KINDS, 'none'))}")
    return tuple(k for k in kinds if k != "none")


def make_schedule(seed: int, kinds: tuple[str, ...], time_limit: float, interval: float,
                  nodes: int) -> list[Fault]:
    """Faults in order, cycling through a seeded shuffle of `kinds`."""
    if not kinds or interval <= 0:
        return []
    rng = random.Random(seed)
    out: list[Fault] = []
    t = interval / 2
    order: list[str] = []
    while t + interval <= time_limit:
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop()
        ids = list(range(1, nodes + 1))
        if kind == "partition":
            minority = rng.randint(1, max(1, (nodes - 1) // 2))
            victims = tuple(sorted(rng.sample(ids, minority)))
        else:
            victims = (rng.choice(ids),)
        variant, fault_seed = "", 0
        if kind == "corrupt":
            variant = f"{rng.choice(CORRUPTIONS)}/{rng.choice(STOPS)}"
            fault_seed = rng.randrange(1 << 31)
        elif kind == "quorum":
            variant = rng.choice(QUORUM_ACTIONS)
        out.append(Fault(len(out), kind, round(t, 3), interval, victims, variant, fault_seed))
        t += interval * 1.5
    return out


class Nemesis:
    """Carries out a schedule against a ProxiedCluster, recording every step in the history."""

    def __init__(self, cluster: ProxiedCluster, recorder: Recorder, topic: str, partition_mode: str = "cut") -> None:
        self.cluster = cluster
        self.rec = recorder
        self.topic = topic
        self.partition_mode = partition_mode
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self.corruptions: list[tuple[Fault, Corruption, int]] = []  # (fault, damage, server.log size)

    async def run(self, schedule: list[Fault], t0: float) -> None:
        for fault in schedule:
            await trio.sleep_until(t0 + fault.start)
            try:
                undo = await self._start(fault)
            except Exception as exc:  # a fault that cannot start is recorded, not fatal
                self.rec.record("nemesis", "info", fault.kind, {"id": fault.id, "phase": "error", "error": repr(exc)})
                continue
            # A fault whose start was slow (finding the Raft leader) still holds for half its duration.
            await trio.sleep_until(max(t0 + fault.start + fault.duration, trio.current_time() + fault.duration / 2))
            with trio.CancelScope(shield=True):
                await undo()

    async def _describe(self) -> tuple[int, int]:
        """(leader of partition 0 of the topic, active controller) as the cluster reports them."""
        async with AsyncAdmin(self.cluster.bootstrap_servers, request_timeout_ms=3000,
                              default_api_timeout_ms=3000) as admin:
            (desc,) = await admin.describe_topics([self.topic])
            leader = next(p.leader for p in desc.partitions if p.partition == 0)
            controller = (await admin.describe_cluster()).controller_id
        return leader, controller

    async def _txn_coordinator(self) -> int:
        """The node coordinating TXN_COORDINATOR_OF (FindCoordinator key_type 1)."""
        from raftka.client.cluster import Cluster
        from raftka.client.txn_admin import find_transaction_coordinator

        async with trio.open_nursery() as nursery:
            cluster = Cluster(self.cluster.bootstrap_servers, nursery, request_timeout_ms=3000)
            try:
                return await find_transaction_coordinator(cluster, TXN_COORDINATOR_OF)
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    def _note(self, fault: Fault, phase: str, **extra) -> None:
        self.rec.record("nemesis", "info", fault.kind, {"id": fault.id, "phase": phase, **extra})

    async def _start(self, fault: Fault):
        kind = fault.kind
        if kind in ("kill", "restart", "leader-kill", "controller-kill", "txn-coordinator-kill"):
            if kind in ("kill", "restart"):
                victim = fault.nodes[0]
            elif kind == "txn-coordinator-kill":
                with trio.fail_after(5):
                    victim = await self._txn_coordinator()
            else:
                with trio.fail_after(5):
                    leader, controller = await self._describe()
                victim = leader if kind == "leader-kill" else controller
            stop = self.cluster.stop_node if kind == "restart" else self.cluster.kill
            await trio.to_thread.run_sync(stop, victim)
            self.killed.add(victim)
            self._note(fault, "start", nodes=[victim])

            async def restart() -> None:
                await trio.to_thread.run_sync(self.cluster.start_node, victim)
                self.killed.discard(victim)
                self._note(fault, "stop", nodes=[victim])
            return restart
        if kind == "pause":
            victim = fault.nodes[0]
            self.cluster.pause(victim)
            self.paused.add(victim)
            self._note(fault, "start", nodes=[victim])

            async def resume() -> None:
                self.cluster.resume(victim)
                self.paused.discard(victim)
                self._note(fault, "stop", nodes=[victim])
            return resume
        if kind == "partition":
            await self._partition(set(fault.nodes))
            self._note(fault, "start", nodes=list(fault.nodes), mode=self.partition_mode)

            async def heal() -> None:
                await trio.to_thread.run_sync(self.cluster.proxies.heal)
                self._note(fault, "stop")
            return heal
        if kind == "isolate-leader-then-kill":
            return await self._isolate_leader_then_kill(fault)
        if kind == "corrupt":
            return await self._corrupt(fault)
        if kind == "quorum":
            return await self._quorum(fault)
        raise ValueError(f"nemesis kind {kind!r}; expected one of {KINDS}")

    async def _partition(self, side: set[int], cut_clients: bool = False,
                         kinds: frozenset[str] = frozenset(PROXY_KINDS)) -> None:
        others = set(self.cluster.nodes) - side
        pairs = {frozenset((a, b)) for a in side for b in others}
        if cut_clients:
            pairs |= {frozenset((a, CLIENT)) for a in side}
        await trio.to_thread.run_sync(self.cluster.proxies.partition, pairs, self.partition_mode, kinds)

    async def _isolate_leader_then_kill(self, fault: Fault):
        """Kafka 0.8's loss: cut the leader's data path to its followers (clients still reach it,
        and the quorum path stays up so the ISR shrink reaches it) so its ISR shrinks to itself
        and, with min.insync.replicas=1, it acknowledges alone; then kill it and heal, so a
        follower without those writes becomes leader (needs unclean leader election)."""
        with trio.fail_after(5):
            leader, _ = await self._describe()
        await self._partition({leader}, kinds=frozenset({"data"}))
        self._note(fault, "start", nodes=[leader], step="isolate")

        async def kill_then_heal() -> None:
            await trio.to_thread.run_sync(self.cluster.kill, leader)
            self._note(fault, "kill", nodes=[leader])
            await trio.to_thread.run_sync(self.cluster.proxies.heal)
            await trio.sleep(fault.duration / 2)  # let a survivor take over before the old leader returns
            await trio.to_thread.run_sync(self.cluster.start_node, leader)
            self._note(fault, "stop", nodes=[leader])
        return kill_then_heal

    async def _quorum(self, fault: Fault):
        """Kill, pause or isolate (every link to the other nodes cut; clients still reach it)
        the Raft leader of the metadata quorum, as the voters report it
        (`raftka quorum status`); the active controller if no voter claims to lead."""
        config_path = direct_config(self.cluster)
        victim = None
        with trio.move_on_after(10):  # an election may be under way (the previous fault's)
            while (victim := await raft_leader(config_path)) is None:
                await trio.sleep(0.5)
        if victim is None:
            with trio.fail_after(5):
                _, victim = await self._describe()
        if victim not in self.cluster.nodes:
            raise RuntimeError(f"no Raft leader or controller known (got {victim!r})")
        action = fault.variant or "kill"
        if action == "kill":
            await trio.to_thread.run_sync(self.cluster.kill, victim)
            self.killed.add(victim)
        elif action == "pause":
            self.cluster.pause(victim)
            self.paused.add(victim)
        else:
            await self._partition({victim})
        self._note(fault, "start", nodes=[victim], action=action)

        async def undo() -> None:
            if action == "kill":
                await trio.to_thread.run_sync(self.cluster.start_node, victim)
                self.killed.discard(victim)
            elif action == "pause":
                self.cluster.resume(victim)
                self.paused.discard(victim)
            else:
                await trio.to_thread.run_sync(self.cluster.proxies.heal)
            self._note(fault, "stop", nodes=[victim], action=action)
        return undo

    async def _corrupt(self, fault: Fault):
        """Stop the node, damage one closed segment of a partition it hosts, restart it at the undo.

        raftka CRC-checks flushed segments on open: the node must log the damage
        (`log.corrupt_batch`, or `log.recovery.truncated` when the segment lay past its
        recovery point), cut its log there and refetch from the leader. `check_corruptions`
        reads the node's server.log for that once the cluster is whole again."""
        victim = fault.nodes[0]
        damage, stop = fault.variant.split("/")
        # A loaded machine may not have closed a segment on the victim yet: wait a bounded time
        # for one, so the fault damages something rather than being skipped.
        data_dir = self.cluster.nodes[victim].directory / "data"
        with trio.move_on_after(CLOSED_SEGMENT_WAIT_S):
            while not await trio.to_thread.run_sync(closed_segments, data_dir, self.topic):
                await trio.sleep(0.25)
        if stop == "kill":
            await trio.to_thread.run_sync(self.cluster.kill, victim)
        else:
            await trio.to_thread.run_sync(self.cluster.stop_node, victim)
        self.killed.add(victim)
        node = self.cluster.nodes[victim]
        log_path = node.directory / "server.log"
        log_size = log_path.stat().st_size if log_path.exists() else 0
        done = corrupt_segment(node.directory / "data", self.topic, damage, random.Random(fault.seed))
        if done is None:
            self._note(fault, "start", nodes=[victim], variant=fault.variant, error="no closed segment to damage")
        else:
            self.corruptions.append((fault, done, log_size))
            self._note(fault, "start", nodes=[victim], variant=fault.variant, **done.describe())

        async def restart() -> None:
            await trio.to_thread.run_sync(self.cluster.start_node, victim)
            self.killed.discard(victim)
            self._note(fault, "stop", nodes=[victim])
        return restart

    async def check_corruptions(self, timeout: float = 30.0) -> list[dict]:
        """Record, for each corruption, whether its node logged detecting it after the restart."""
        deadline = trio.current_time() + timeout
        results = []
        for fault, done, log_size in self.corruptions:
            node = self.cluster.nodes[fault.nodes[0]]
            while True:
                found = detection_in_log(node.directory / "server.log", log_size, self.topic, done.partition)
                if found is not None or trio.current_time() > deadline:
                    break
                await trio.sleep(0.2)
            outcome = {"id": fault.id, "phase": "checked", "node": fault.nodes[0], "detected": found is not None,
                       **done.describe()}
            if found is not None:
                outcome["event"] = {k: found.get(k) for k in ("event", "level", "segment", "error", "bytes",
                                                              "valid_bytes", "timestamp") if k in found}
            self.rec.record("nemesis", "info", "corrupt", outcome)
            results.append(outcome)
        return results

    async def heal_all(self) -> None:
        """Undo everything still in effect: heal links, resume and restart nodes."""
        await trio.to_thread.run_sync(self.cluster.proxies.heal)
        for node_id, node in self.cluster.nodes.items():
            if node.running:
                self.cluster.resume(node_id)
            else:
                await trio.to_thread.run_sync(self.cluster.start_node, node_id)
        self.killed.clear()
        self.paused.clear()
        self.rec.record("nemesis", "info", "heal-all", {"phase": "final"})
