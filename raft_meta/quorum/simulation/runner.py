"""One seed of the quorum simulation, and campaigns of seeds (`make simulate`).

A seed decides everything: 3 or 5 voters, the network's faults, the crash kinds, the client
operations and when each happens. Each voter is a real `RaftSyncObj` (pysyncobj with
raftka's fixes, `autoTick=False`) with raftka's real `_MetadataLog` consumer (the `apply` of
`raft_meta/metadata/apply.py` and the image, snapshots included) over a `SimJournal` and a real
dump file in a scratch directory, so a restart loads the node's own files. The run:

1. chaos (`chaos_s` simulated seconds): client operations, crashes (kill -9 or power loss,
   which loses the unsynced journal tail), restarts, one-way and two-way partitions,
   connection resets, on a network that drops, delays, duplicates and reorders;
2. heal: every partition healed, the network quiet (no drops, duplicates), the crashed
   voters restarted except, on some seeds, a minority left down;
3. liveness: a probe operation must be acknowledged within `LIVENESS_BOUND_S` of the heal,
   and then every running voter must apply the same last offset (same image digest).

The checker (`checker.py`) runs after every step. A failure raises `SimulationFailure`
naming the seed; `run_seed(seed)` replays it exactly (same events, same outcome).

Usage: python -m raftka.raft_meta.quorum.simulation --seeds N --first-seed S [--tcp] [--no-fsync]
       [--as-is | --without truncation|snapshot|votes]
"""

from __future__ import annotations

import collections
import contextlib
import functools
import heapq
import logging
import multiprocessing
import os
import queue
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf

from raftka.raft_meta.metadata.records import (
    Partition,
    PartitionChange,
    RecordBatch,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    decode_record,
    encode_record,
)
from raftka.raft_meta.quorum.pysyncobj_patches import JournalSpec, RaftSyncObj
from raftka.raft_meta.quorum.quorum import _MetadataLog
from raftka.raft_meta.quorum.simulation.checker import Checker, InvariantViolation
from raftka.raft_meta.quorum.simulation.disk import SimDisk
from raftka.raft_meta.quorum.simulation.network import (
    NetworkProfile,
    RunawayStep,
    Scheduler,
    SimNetwork,
    SimTransport,
    install_clock,
)

US = 1_000_000
TICK_US = 50_000  # SyncObjConf.autoTickPeriod as raftka sets it
LIVENESS_BOUND_S = 20.0
CONVERGE_BOUND_S = 10.0
_SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else None


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, at_us: int, reason: str, options: str = "") -> None:
        replay = (f"python -m raftka.raft_meta.quorum.simulation --seeds 1 --first-seed {seed}{options}" if options
                  else f"make simulate SEEDS=1 FIRST_SEED={seed}")
        super().__init__(f"simulation seed {seed} failed at t={at_us / US:.6f}s: {reason} (replay: {replay})")
        self.seed = seed
        self.at_us = at_us
        self.reason = reason
        self.options = options

    def __reduce__(self):  # from a `campaign(jobs=N)` worker process
        return SimulationFailure, (self.seed, self.at_us, self.reason, self.options)


@dataclass
class SeedResult:
    seed: int
    voters: int
    sim_seconds: float
    events: int
    committed: int
    acked: int
    crashes: int
    elections: int


class _NoPoller:
    def subscribe(self, descr, callback, eventMask):
        pass

    def unsubscribe(self, descr):
        pass

    def poll(self, timeout):
        pass


class _NoNotifier:
    def notify(self):
        pass


class _CommandsQueue:
    """pysyncobj's FastQueue (its commands queue) without the lock: one thread here."""

    def __init__(self, max_size: int) -> None:
        self._items: collections.deque = collections.deque()
        self._max_size = max_size

    def put_nowait(self, value) -> None:
        if self._max_size > 0 and len(self._items) >= self._max_size:
            raise queue.Full()
        self._items.append(value)

    def get_nowait(self):
        if not self._items:
            raise queue.Empty()
        return self._items.popleft()


class _SimSyncObj(RaftSyncObj):
    """RaftSyncObj whose election timeouts come from the node's seeded generator."""

    def __init__(self, *args, sim_rng: random.Random, **kwargs) -> None:
        self._sim_rng = sim_rng
        super().__init__(*args, **kwargs)

    def _SyncObj__generateRaftTimeout(self):
        conf = self.conf
        return conf.raftMinTimeout + (conf.raftMaxTimeout - conf.raftMinTimeout) * self._sim_rng.random()


class _WithoutTruncationFix(_SimSyncObj):
    """pysyncobj's own AppendEntries handling (truncates matching entries): `--as-is`."""

    def _conflict_only(self, node, message):
        return message


class _WithoutSnapshotFix(_SimSyncObj):
    """pysyncobj's own snapshot install (wipes the log; commit index moved on every piece)."""

    def _install_snapshot(self, node, message) -> None:
        SyncObj._SyncObj__onMessageReceived(self, node, message)

    def _SyncObj__loadDumpFile(self, clearJournal):
        SyncObj._SyncObj__loadDumpFile(self, clearJournal)


class _WithoutVoteFix(_SimSyncObj):
    """pysyncobj's own vote counting (every grant message counts)."""

    def _first_vote(self, node, term: int) -> bool:
        return True


# The fixes of raft_core one can leave out, to see what each prevents (Simulation.without).
WITHOUT = {"truncation": _WithoutTruncationFix, "snapshot": _WithoutSnapshotFix, "votes": _WithoutVoteFix}


class SimVoter:
    def __init__(self, sim: Simulation, name: str, addresses: list[str]) -> None:
        self.sim = sim
        self.name = name
        self.address = f"{name}:1"
        self.others = [a for a in addresses if a != self.address]
        self.disk = SimDisk(fsync=sim.fsync)
        self.directory = Path(tempfile.mkdtemp(prefix=f"sim-{name}-", dir=_SCRATCH))
        self.rng = random.Random(f"{sim.seed}:{name}:node")
        self.sync: SyncObj | None = None
        self.log: _MetadataLog | None = None
        self.tick_token = 0
        self.tick_at: int | None = None

    @property
    def alive(self) -> bool:
        return self.sync is not None

    def start(self) -> None:
        sim = self.sim
        self.log = _MetadataLog(self._applied, sim.snapshot_bytes)
        conf = SyncObjConf(
            autoTick=False, appendEntriesUseBatch=False, raftMinTimeout=0.5, raftMaxTimeout=1.0,
            appendEntriesPeriod=0.1, leaderFallbackTimeout=1.0, connectionRetryTime=0.5, commandsWaitLeader=False,
            useFork=False, dynamicMembershipChange=False, logCompactionMinEntries=sim.compaction_entries,
            logCompactionMinTime=300.0, journalFile=JournalSpec(str(self.directory / "raft.journal"), self._journal),
            fullDumpFile=str(self.directory / "raft.dump"),
        )
        cls = _SimSyncObj if sim.fix else WITHOUT[sim.without]
        transport = functools.partial(SimTransport, network=sim.network)
        sync = cls(self.address, self.others, conf, consumers=[self.log], transportClass=transport, sim_rng=self.rng)
        notifier = getattr(sync, "_SyncObj__pipeNotifier", None)
        if notifier is not None:  # its pipe would leak a descriptor pair per start
            for fd in (notifier._PipeNotifier__pipeR, notifier._PipeNotifier__pipeW):
                try:
                    os.close(fd)
                except OSError:
                    pass
            sync._SyncObj__pipeNotifier = _NoNotifier()
        sync._poller = _NoPoller()
        sync._SyncObj__commandsQueue = _CommandsQueue(conf.commandsQueueSize)
        self.sync = sync
        self.schedule_tick(0)

    def _applied(self) -> None:
        if self.sync is not None:
            self.sim.checker.record_applied(self.name, self.log, self.sync)

    def _journal(self):
        journal = self.disk.open()
        journal.on_add = functools.partial(self.sim.checker.entry_added, self.name)
        return journal

    def crash(self, power_loss: bool) -> None:
        sync, self.sync = self.sync, None
        self.tick_token += 1
        self.tick_at = None
        sync._doDestroy()
        self.disk.crash(self.rng, power_loss)
        self.sim.checker.crashed(self.name)
        self.sim.crashes += 1

    def schedule_tick(self, delay_us: int) -> None:
        scheduler = self.sim.scheduler
        when = scheduler.now_us + delay_us
        if self.tick_at is not None and self.tick_at <= when:
            return
        self.tick_token = token = self.tick_token + 1
        self.tick_at = when
        heapq.heappush(scheduler._queue, (when, 3, self.name, "", token, self._tick, (token,)))  # scheduler.at

    def _tick(self, token: int) -> None:
        if token != self.tick_token or self.sync is None:
            return
        self.tick_at = None
        self.sync.doTick(0.0)
        if self.sync is not None:
            self.sim.checker.after_step(self.name, self.sync, self.log, self.disk)
        if self.sync is not None:
            self.schedule_tick(TICK_US)


@dataclass
class _Op:
    request_id: str
    record: bytes
    acked: bool = False
    attempts: int = 0


@dataclass
class Simulation:
    seed: int
    fix: bool = True
    without: str = "truncation"  # with fix=False: the raft_core fix left out (WITHOUT)
    fsync: bool = True
    chaos_s: float = 8.0
    voters: int = 0  # 0: the seed chooses 3 or 5
    snapshot_bytes: int = 2048
    compaction_entries: int = 200
    quiet: bool = False  # no network faults (tests that inject their own)
    watch_critical: bool = True  # False: let a CRITICAL line pass, to see what follows it
    tcp: bool = False  # what TCP allows: in order, no drops or duplicates within a connection (resets and partitions stay)
    crashes: int = 0
    ops: dict[str, _Op] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rng = self.rng = random.Random(self.seed)
        self.voters = self.voters or rng.choice((3, 5))
        profile = NetworkProfile(
            drop=rng.choice((0.0, 0.0, 0.01, 0.05, 0.2)),
            duplicate=rng.choice((0.0, 0.02, 0.1)),
            reorder=rng.random() < 0.5,
            delay_max_us=rng.choice((2_000, 20_000, 200_000)),
        )
        if self.quiet:
            profile = NetworkProfile()
        elif self.tcp:
            profile.drop, profile.duplicate, profile.reorder = 0.0, 0.0, False
        self.scheduler = Scheduler()
        self.network = SimNetwork(self.scheduler, self.seed, profile)
        self.network.on_delivered = self._delivered
        self.network.on_send = self._sent
        self.checker = Checker()
        self.checker.watch_critical = self.watch_critical
        names = [f"n{i}" for i in range(1, self.voters + 1)]
        addresses = [f"{n}:1" for n in names]
        self.nodes = {n: SimVoter(self, n, addresses) for n in names}
        self.by_address = {node.address: node for node in self.nodes.values()}
        self.topics: list[tuple[str, str, int]] = []  # (name, id, partitions) created by the workload
        self.brokers: dict[int, int] = {}  # broker id -> epoch (offset of its registration), once acked
        self.op_count = 0
        self.fault_rate_us = rng.choice((300_000, 1_000_000, 3_000_000))
        self.op_rate_us = rng.choice((50_000, 200_000))
        self.power_loss_share = rng.choice((0.0, 0.5, 1.0))

    # --- plumbing ---
    def _delivered(self, address: str) -> None:
        node = self.by_address[address]
        if node.sync is not None:
            self.checker.after_step(node.name, node.sync, node.log, node.disk)
            node.schedule_tick(0)

    def _sent(self, a: str, b: str, message: dict) -> None:
        if message["type"] == "next_node_idx":
            node = self.by_address[a]
            self.checker.acknowledged(node.name, node.disk, message)

    def after_step(self, node: SimVoter) -> None:
        if node.sync is not None:
            self.checker.after_step(node.name, node.sync, node.log, node.disk)

    def alive(self) -> list[SimVoter]:
        return [n for n in self.nodes.values() if n.alive]

    # --- client operations ---
    def _record(self) -> bytes:
        rng = self.rng
        self.op_count += 1
        rid = f"sim-{self.seed}-{self.op_count}"
        kind = rng.random()
        if kind < 0.25 or not self.brokers:
            broker = rng.randint(1, 5)
            return encode_record(RegisterBroker(broker, str(uuid.UUID(int=rng.getrandbits(128))),
                                                (("PLAINTEXT", f"b{broker}", 9092),), request_id=rid))
        if kind < 0.35:
            broker, epoch = rng.choice(sorted(self.brokers.items()))
            return encode_record(UnfenceBroker(broker, epoch, request_id=rid))
        if kind < 0.6 or not self.topics:
            name = f"t{self.op_count}"
            topic_id = str(uuid.UUID(int=rng.getrandbits(128)))
            brokers = sorted(self.brokers)
            parts = []
            for p in range(rng.randint(1, 3)):
                replicas = tuple(rng.sample(brokers, min(len(brokers), 3)))
                parts.append(encode_record(Partition(topic_id, p, replicas, replicas, replicas[0])))
            self.topics.append((name, topic_id, len(parts)))
            return encode_record(RecordBatch((encode_record(Topic(name, topic_id)), *parts), request_id=rid))
        name, topic_id, partitions = rng.choice(self.topics)
        if kind < 0.7:
            return encode_record(RemoveTopic(topic_id, request_id=rid))
        # An ISR / leader change decided on the partition epoch some voter's image shows.
        partition = rng.randrange(partitions)
        image = self.rng.choice(self.alive()).log.image if self.alive() else None
        topic = image.topics.get(topic_id) if image is not None else None
        current = topic.partitions.get(partition) if topic is not None else None
        if current is None:
            return encode_record(PartitionChange(topic_id, partition, 0, request_id=rid))
        isr = tuple(b for b in current.replicas if rng.random() < 0.7) or current.replicas[:1]
        return encode_record(PartitionChange(topic_id, partition, current.partition_epoch, leader=isr[0], isr=isr,
                                             request_id=rid))

    def submit(self, op: _Op | None = None) -> None:
        alive = self.alive()
        if not alive:
            return
        if op is None:
            record = self._record()
            op = _Op(f"sim-{self.seed}-{self.op_count}", record)
            self.ops[op.request_id] = op
        node = self.rng.choice(alive)
        op.attempts += 1
        sync = node.sync

        def on_result(result, error, node=node, sync=sync) -> None:
            if error == FAIL_REASON.SUCCESS and isinstance(result, int) and result > 0:
                op.acked = True
                self.checker.ack(op.request_id, result, op.record, node.name)
                self._learn(op.record, result)

        node.log.apply(op.record, callback=on_result)
        node.schedule_tick(0)

    def _learn(self, record: bytes, offset: int) -> None:
        decoded = decode_record(record)
        if isinstance(decoded, RegisterBroker):
            self.brokers[decoded.broker_id] = offset

    # --- faults ---
    def _fault(self) -> None:
        rng, names = self.rng, sorted(self.nodes)
        choice = rng.random()
        a, b = rng.sample(names, 2)
        if choice < 0.25:
            alive = self.alive()
            if len(alive) > 1 or rng.random() < 0.2:
                victim = rng.choice(alive) if alive else None
                if victim is not None:
                    victim.crash(power_loss=rng.random() < self.power_loss_share)
        elif choice < 0.45:
            dead = [n for n in self.nodes.values() if not n.alive]
            if dead:
                rng.choice(dead).start()
        elif choice < 0.6:
            self.network.partition(f"{a}:1", f"{b}:1", one_way=rng.random() < 0.5)
        elif choice < 0.7:
            for other in names:  # isolate a (both ways)
                if other != a:
                    self.network.partition(f"{a}:1", f"{other}:1", one_way=False)
        elif choice < 0.85:
            self.network.heal(f"{a}:1", f"{b}:1")
        else:
            self.network.reset(f"{a}:1", f"{b}:1")

    def _every(self, mean_us: int, action, until_us: int) -> None:
        def run() -> None:
            if self.scheduler.now_us >= until_us:
                return
            action()
            self.scheduler.later(self.rng.randint(1, 2 * mean_us), run)
        self.scheduler.later(self.rng.randint(1, 2 * mean_us), run)

    # --- the run ---
    def _run_until(self, until_us: int, done=None) -> bool:
        return self.scheduler.run_until(until_us, done)

    @property
    def events(self) -> int:
        return self.scheduler.steps

    def run(self) -> SeedResult:
        with self.running():
            return self._run()

    @contextlib.contextmanager
    def running(self):
        """The simulated clock and the CRITICAL-line watch on this thread; everything stopped and
        removed on exit. An invariant broken inside becomes a `SimulationFailure`."""
        logger = logging.getLogger("pysyncobj.syncobj")
        logger.addHandler(self.checker.critical)
        install_clock(self.scheduler)
        try:
            yield self
        except (InvariantViolation, RunawayStep) as exc:
            options = "".join((f" --without {self.without}" if not self.fix else "",
                               " --no-fsync" if not self.fsync else "", " --tcp" if self.tcp else ""))
            raise SimulationFailure(self.seed, self.scheduler.now_us, str(exc), options) from None
        finally:
            install_clock(None)
            logger.removeHandler(self.checker.critical)
            for node in self.nodes.values():
                if node.sync is not None:
                    node.sync._doDestroy()
                    node.sync = None
                shutil.rmtree(node.directory, ignore_errors=True)

    def run_for(self, seconds: float, done=None) -> bool:
        """Advance the simulated time (inside `running()`); True once `done()` holds."""
        return self._run_until(self.scheduler.now_us + int(seconds * US), done)

    def leader(self) -> SimVoter | None:
        leaders = [n for n in self.alive() if n.sync._isLeader()]
        return max(leaders, key=lambda n: n.sync._getTerm()) if leaders else None

    def start_all(self) -> None:
        for node in self.nodes.values():
            node.start()

    def _run(self) -> SeedResult:
        self.start_all()
        chaos_end = int(self.chaos_s * US)
        self._every(self.op_rate_us, self.submit, chaos_end)
        self._every(self.fault_rate_us, self._fault, chaos_end)
        self._run_until(chaos_end)
        # Heal: quiet network, everyone back but (sometimes) a minority.
        self.network.heal_all()
        self.network.profile.drop = self.network.profile.duplicate = 0.0
        dead = [n for n in self.nodes.values() if not n.alive]
        keep_down = self.rng.randint(0, (self.voters - 1) // 2) if self.rng.random() < 0.3 else 0
        for node in dead[keep_down:]:
            node.start()
        healed = self.scheduler.now_us
        probe = _Op(f"sim-{self.seed}-probe", encode_record(RegisterBroker(
            99, str(uuid.UUID(int=self.rng.getrandbits(128))), (("PLAINTEXT", "probe", 9092),),
            request_id=f"sim-{self.seed}-probe")))
        self.ops[probe.request_id] = probe
        deadline = healed + int(LIVENESS_BOUND_S * US)
        while not probe.acked:
            self.submit(probe)
            retry = min(deadline, self.scheduler.now_us + US)
            if self._run_until(retry, lambda: probe.acked):
                break
            if self.scheduler.now_us >= deadline:
                raise InvariantViolation(
                    f"liveness: no operation committed within {LIVENESS_BOUND_S} s of the heal "
                    f"({len(self.alive())} of {self.voters} voters up, network quiet)")
        converge_deadline = self.scheduler.now_us + int(CONVERGE_BOUND_S * US)

        def converged() -> bool:
            lasts = {n.log.last for n in self.alive()}
            return len(lasts) == 1
        if not self._run_until(converge_deadline, converged):
            lasts = {n.name: n.log.last for n in self.alive()}
            raise InvariantViolation(f"liveness: voters did not converge within {CONVERGE_BOUND_S} s: {lasts}")
        return SeedResult(self.seed, self.voters, self.scheduler.now_us / US, self.events,
                          self.checker.max_committed, self.checker.acked, self.crashes,
                          len(self.checker.leaders))


def run_seed(seed: int, *, fix: bool = True, fsync: bool = True, chaos_s: float = 8.0, tcp: bool = False,
             without: str = "truncation") -> SeedResult:
    """Run one seed; raises SimulationFailure (which names the seed) if an invariant breaks.
    fix=False leaves out one fix of raft_core (`without`: truncation, snapshot or votes)."""
    return Simulation(seed, fix=fix, fsync=fsync, chaos_s=chaos_s, tcp=tcp, without=without).run()


def campaign(seeds: int, first_seed: int = 0, *, fix: bool = True, fsync: bool = True, chaos_s: float = 8.0,
             tcp: bool = False, without: str = "truncation", stop_at_first: bool = True,
             max_seconds: float | None = None, report=print, jobs: int = 1,
             chunk: int = 0) -> list[SimulationFailure]:
    """Seeds first_seed.. first_seed+seeds-1 (stopping early after `max_seconds` of CPU time, all
    processes together). `jobs` > 1: that many worker processes run chunks of `chunk` consecutive
    seeds (0: a size chosen from the range); results are taken in seed order, so the failures
    reported (and the first one, with `stop_at_first`) are those of a one-process run."""
    options = {"fix": fix, "fsync": fsync, "chaos_s": chaos_s, "tcp": tcp, "without": without}
    failures: list[SimulationFailure] = []
    started, cpu = time.perf_counter(), time.process_time()
    done = 0
    if jobs <= 1:
        for seed in range(first_seed, first_seed + seeds):
            result = _run_chunk(seed, 1, options, stop_at_first, None)
            done += result[0]
            for failure in result[1]:
                report(str(failure))
                failures.append(failure)
            if failures and stop_at_first:
                break
            if max_seconds is not None and time.process_time() - cpu > max_seconds:
                break
            if done % 1000 == 0:
                elapsed = time.perf_counter() - started
                report(f"{done} seeds, {elapsed:.1f} s, {done / elapsed:.1f} seeds/s")
        cpu = time.process_time() - cpu
    else:
        chunk = chunk or max(1, min(100, seeds // (jobs * 8) or 1))
        starts = range(first_seed, first_seed + seeds, chunk)
        budget = None if max_seconds is None else max_seconds / jobs  # each worker's share of the CPU
        context = multiprocessing.get_context("fork")
        worker_cpu = 0.0
        with context.Pool(jobs) as pool:
            chunks = [(start, min(chunk, first_seed + seeds - start), options, stop_at_first, budget)
                      for start in starts]
            for (_, count, *_), (ran, chunk_failures, chunk_cpu) in zip(chunks, pool.imap(_run_chunk_star, chunks), strict=True):
                done += ran
                worker_cpu += chunk_cpu
                for failure in chunk_failures:
                    report(str(failure))
                    failures.append(failure)
                if (failures and stop_at_first) or ran < count:
                    break  # the first failure in seed order, or a worker's CPU budget spent
                if done // 1000 != (done - ran) // 1000:
                    elapsed = time.perf_counter() - started
                    report(f"{done} seeds, {elapsed:.1f} s, {done / elapsed:.1f} seeds/s")
            pool.terminate()  # chunks still running after a failure: their seeds come later
        cpu = worker_cpu
    elapsed = time.perf_counter() - started
    jobs_note = f" in {jobs} processes" if jobs > 1 else ""
    report(f"{done} seeds from {first_seed} in {elapsed:.1f} s wall, {cpu:.1f} s CPU{jobs_note} "
           f"({done / cpu if cpu else 0:.1f} seeds per CPU second), {len(failures)} failed")
    return failures


def _run_chunk(start: int, count: int, options: dict, stop_at_first: bool,
               budget: float | None) -> tuple[int, list[SimulationFailure], float]:
    """Seeds start..start+count-1 in this process: (seeds run, failures, CPU seconds). Stops after
    a failure (`stop_at_first`) or once this process has used `budget` CPU seconds."""
    cpu = time.process_time()
    failures: list[SimulationFailure] = []
    ran = 0
    for seed in range(start, start + count):
        if budget is not None and time.process_time() > budget:
            break
        ran += 1
        try:
            run_seed(seed, **options)
        except SimulationFailure as exc:
            failures.append(exc)
            if stop_at_first:
                break
    return ran, failures, time.process_time() - cpu


def _run_chunk_star(args: tuple) -> tuple[int, list[SimulationFailure], float]:
    return _run_chunk(*args)
