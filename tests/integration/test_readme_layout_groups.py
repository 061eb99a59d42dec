"""Kafka 4 groups and transactions on the documented multi-machine layout, with Kafka's defaults.

tests/integration/test_readme_layouts.py runs docs/operations.md's "Several machines" section as
written (three nodes' server.properties from the page's block, formatted and started with the
page's commands) under an idempotent produce load. This module runs the same cluster (the
page's own layout, nothing added: every group, share and transaction setting is Kafka's
default) with, at the same time:

- a KIP-848 consumer group (the SDK's consumer, group_protocol="consumer") of 3 members reading
  the load's topic, committing what each poll returned;
- a share group (the SDK's ShareConsumer, explicit acknowledgement) of 3 consumers reading the
  same topic (its one setting: share.auto.offset.reset=earliest, a group config as a user
  sets it), ACCEPTing every record, confirmed by commit_sync;
- chaos/txn_workload.py's transactions (the SDK's transactional producer: committed and
  aborted transactions, a consume-transform-produce pipeline, a read_committed reader);

while each node is killed with SIGKILL and restarted, one at a time, and then all three are
stopped with SIGTERM together and started again together, the members running throughout.
Then the members leave and the cluster is stopped and started together once more, so that
what each group is (state, epoch, committed offsets, share start offsets) is compared as it was
before and after: the groups' records in `__consumer_offsets` and the share state in
`__share_group_state` are all that can carry it over. New members then finish the topic.

Checked: every acknowledged record consumed by the group, none consumed again below an
offset whose commit was acknowledged, the final commits at the end of every partition; every
record accepted by the share group, none delivered again after its acceptance was confirmed,
the start offsets at the end; each committed transaction read exactly once, no aborted record
read, no transaction half-visible (chaos/txn_checker.py); the produce load's records all
there (chaos/checker.py).

Transaction version: the SDK's producer runs the classic protocol (client/versions.py caps
EndTxn at v3), and so does librdkafka 2.16 (confluent-kafka: AddPartitionsToTxn v0, EndTxn v1):
neither uses transaction.version 2 although the brokers finalize it. Kafka's Java producer does:
tests/compat/test_readme_layout_txn_v2.py (make compat) runs this scenario with it as well.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import trio

from raftka.chaos import txn_checker
from raftka.chaos.checker import check
from raftka.chaos.history import HistoryWriter, Op, read_history
from raftka.chaos.metadata_probe import critical_lines
from raftka.chaos.txn_workload import TxnWorkload, TxnWorkloadConfig, create_topics, drain_txn
from raftka.chaos.workload import Recorder, Workload, WorkloadConfig, drain
from raftka.client import group_admin
from raftka.client.admin import AsyncAdmin
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaError
from raftka.client.records import TopicPartition
from raftka.client.share_consumer import AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType
from tests.integration.test_readme_layouts import (
    ACKS_PER_STEP,
    DOC,
    HOLD_S,
    START_S,
    ReadmeCluster,
    _acks_reach,
    _missing_topics,
    readme_commands,
    readme_layouts,
)

T = TypeVar("T")
TOPIC = "readme-events"
TXN_TOPIC = "readme-txn"  # chaos/txn_workload.py's readme-txn-{txn,in,out}
PARTITIONS = 3
GROUP, SHARE_GROUP, MEMBERS = "readme-kip848", "readme-share", 3
RATE = 30.0  # the produce load's records per second
SETTLE_S = 60.0  # the most the groups and the pipeline take to reach the end of the topics


# --- what the members saw ----------------------------------------------------------------

@dataclass
class Journal:
    """The members' observations in one order (one trio loop appends them all)."""

    seq: itertools.count = field(default_factory=itertools.count)
    # KIP-848 group: (seq, member, partition, offset, value) per record a poll returned, and
    # (seq, member, {partition: offset}) per commit the coordinator acknowledged
    polls: list[tuple[int, str, int, int, int]] = field(default_factory=list)
    commits: list[tuple[int, str, dict[int, int]]] = field(default_factory=list)
    # share group: (seq, consumer, kind, value, delivery count); kind ACQ (delivered), OK
    # (acceptance confirmed by commit_sync), UNKNOWN (ACCEPT sent, answer lost)
    share: list[tuple[int, str, str, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def polled(self, member: str, records: list[tuple[int, int, int]]) -> None:
        self.polls += [(next(self.seq), member, p, o, v) for p, o, v in records]

    def committed(self, member: str, offsets: dict[int, int]) -> None:
        self.commits.append((next(self.seq), member, offsets))

    def shared(self, consumer: str, kind: str, value: int, count: int = 0) -> None:
        self.share.append((next(self.seq), consumer, kind, value, count))


async def kip848_member(name: str, bootstrap: str, journal: Journal, stop: trio.Event) -> None:
    """A consumer-protocol member committing exactly what each poll returned."""
    while not stop.is_set():
        try:
            async with AsyncConsumer(bootstrap, group_id=GROUP, group_protocol="consumer", client_id=name,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     fetch_max_wait_ms=300, request_timeout_ms=5000) as consumer:
                consumer.subscribe([TOPIC])
                while not stop.is_set():
                    batch = await consumer.poll(timeout_ms=300)
                    records = [(r.partition, r.offset, int(r.value)) for rs in batch.values() for r in rs
                               if r.value is not None]
                    if not records:
                        continue
                    journal.polled(name, records)
                    offsets = {tp.partition: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
                    try:
                        await consumer.commit({TopicPartition(TOPIC, p): o for p, o in offsets.items()})
                    except KafkaError as exc:  # refused or unanswered: the next owner rereads
                        journal.errors.append(f"{name} commit: {exc!r}")
                        continue
                    journal.committed(name, offsets)
        except (KafkaError, OSError) as exc:
            journal.errors.append(f"{name}: {exc!r}")
            await trio.sleep(0.3)


async def share_member(name: str, bootstrap: str, journal: Journal, stop: trio.Event) -> None:
    """A share consumer ACCEPTing every record, each poll's acceptances confirmed by commit_sync."""
    while not stop.is_set():
        try:
            async with AsyncShareConsumer(bootstrap, group_id=SHARE_GROUP, client_id=name,
                                          acknowledgement_mode="explicit", fetch_max_wait_ms=300,
                                          request_timeout_ms=5000) as consumer:
                consumer.subscribe([TOPIC])
                while not stop.is_set():
                    records = await consumer.poll(300)
                    for r in records:
                        journal.shared(name, "ACQ", int(r.value), r.delivery_count)
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    if not records:
                        continue
                    try:
                        results = await consumer.commit_sync()
                    except KafkaError as exc:
                        journal.errors.append(f"{name} commit_sync: {exc!r}")
                        results = {}
                    for r in records:
                        tp = TopicPartition(TOPIC, r.partition)
                        confirmed = tp in results and results[tp] is None
                        journal.shared(name, "OK" if confirmed else "UNKNOWN", int(r.value))
        except (KafkaError, OSError) as exc:
            journal.errors.append(f"{name}: {exc!r}")
            await trio.sleep(0.3)


# --- what the groups are, through the admin API --------------------------------------------

@dataclass(frozen=True)
class GroupsSeen:
    """Each group as described: (state, group epoch, offsets by partition), or why it could not be.
    The offsets are the committed ones for the KIP-848 group, the start offsets for the share group."""

    kip848: tuple[str, int | None, dict[int, int | None]] | str
    share: tuple[str, int, dict[int, int]] | str

    def at(self, ends: dict[int, int]) -> bool:
        return all(not isinstance(g, str) and g[2] == ends for g in (self.kip848, self.share))


async def retried(what: str, fn: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """fn() until it answers without a retriable error (the cluster may be reloading)."""
    with trio.fail_after(timeout):
        while True:
            try:
                return await fn()
            except (KafkaError, OSError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable and exc.code is not None:
                    raise AssertionError(f"{what}: {exc!r}") from exc
                await trio.sleep(0.2)


async def groups_seen(bootstrap: str) -> GroupsSeen:
    async def kip848() -> tuple[str, int | None, dict[int, int | None]]:
        async with AsyncAdmin(bootstrap, request_timeout_ms=5000) as admin:
            view = await group_admin.describe_group(admin.cluster, GROUP)
        return view.state, view.group_epoch, {p.tp.partition: p.committed for p in view.partitions}

    async def share() -> tuple[str, int, dict[int, int]]:
        async with AsyncAdmin(bootstrap, request_timeout_ms=5000) as admin:
            group = await admin.describe_share_group(SHARE_GROUP)
            starts = await admin.describe_share_group_offsets(SHARE_GROUP, {TOPIC: range(PARTITIONS)})
        return group.state, group.group_epoch, {o.tp.partition: o.start_offset for o in starts}

    async def described(what: str, fn: Callable[[], Awaitable[T]]) -> T | str:
        try:
            return await retried(what, fn)
        except (AssertionError, trio.TooSlowError) as exc:
            return f"{what}: {type(exc).__name__}: {exc}"

    return GroupsSeen(await described(f"describing {GROUP}", kip848), await described(f"describing {SHARE_GROUP}", share))


async def settled(bootstrap: str, timeout: float) -> tuple[dict[int, int], GroupsSeen]:
    """Wait until both groups are at the end of every partition; (ends, what was seen last)."""
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    async def ends_now() -> dict[int, int]:
        async with AsyncConsumer(bootstrap, request_timeout_ms=5000) as probe:
            return {tp.partition: o for tp, o in (await probe.end_offsets(tps)).items()}

    ends = await retried("the end offsets", ends_now)
    seen = await groups_seen(bootstrap)
    with trio.move_on_after(timeout):
        while not seen.at(ends):
            await trio.sleep(0.5)
            seen = await groups_seen(bootstrap)
    return ends, seen


# --- the run -------------------------------------------------------------------------------

@dataclass
class Run:
    journal: Journal
    history: list[Op]  # the produce load's (chaos/checker.py)
    txn_history: list[Op]  # the transactions' (chaos/txn_checker.py)
    side_history: list[Op] = field(default_factory=list)  # a SideLoad's transactions
    # the members' confirmed commits and acceptances: before the first full stop, and a while after it
    across: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
    before: GroupsSeen | None = None  # just before the second full stop, every member gone
    after: GroupsSeen | None = None  # right after the second full start, before any member is back
    ends: dict[int, int] = field(default_factory=dict)
    final: GroupsSeen | None = None
    exit_codes: list[int | None] = field(default_factory=list)  # of the nodes stopped together
    problems: list[str] = field(default_factory=list)
    critical: list[str] = field(default_factory=list)


class Members:
    """Both groups' members, started in a nursery, stopped together (each leaves its group)."""

    def __init__(self, bootstrap: str, journal: Journal, generation: int) -> None:
        self.bootstrap, self.journal, self.generation = bootstrap, journal, generation
        self.stop, self.gone = trio.Event(), trio.Event()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                for i in range(MEMBERS):
                    nursery.start_soon(kip848_member, f"m{self.generation}.{i}", self.bootstrap, self.journal,
                                       self.stop)
                    nursery.start_soon(share_member, f"s{self.generation}.{i}", self.bootstrap, self.journal,
                                       self.stop)
                task_status.started()
        finally:
            self.gone.set()

    async def leave(self, timeout: float = 30.0) -> None:
        self.stop.set()
        with trio.fail_after(timeout):
            await self.gone.wait()


def _confirmed(journal: Journal) -> tuple[int, int]:
    return len(journal.commits), sum(kind == "OK" for _, _, kind, _, _ in journal.share)


async def _restart_all(cluster: ReadmeCluster, run: Run, rec: Recorder, topics: dict[str, int], when: str) -> None:
    """SIGTERM to every node together, then start them all together."""
    rec.record("nemesis", "info", "stop", {"phase": "start", "nodes": sorted(cluster.nodes)})
    await trio.to_thread.run_sync(cluster.stop)
    run.exit_codes += [n.process.returncode if n.process else None for n in cluster.nodes.values()]
    await trio.to_thread.run_sync(cluster.start)
    await trio.to_thread.run_sync(cluster.wait_ready, START_S)
    rec.record("nemesis", "info", "stop", {"phase": "stop", "nodes": sorted(cluster.nodes)})
    run.problems += await _missing_topics(cluster, topics, when)


async def _progress(acked: list[int], journal: Journal, step: int) -> None:
    """The load acknowledged `step` more records and both groups went on (bounded by HOLD_S)."""
    commits, accepted = len(journal.commits), len(journal.share)
    await _acks_reach(acked, acked[0] + step, HOLD_S)
    with trio.move_on_after(HOLD_S):
        while len(journal.commits) == commits or len(journal.share) == accepted:
            await trio.sleep(0.05)


class SideLoad(Protocol):
    """Another client's transactions in the run (tests/compat/test_readme_layout_txn_v2.py: Kafka's
    Java producer), on TXN_TOPIC's txn topic: started with the load, stopped with it (blocking
    calls); `stop` returns its transactions as chaos/txn_checker.py's ops."""

    def start(self, bootstrap: str) -> None: ...

    def stop(self) -> list[Op]: ...


async def _scenario(cluster: ReadmeCluster, run: Run, rec: Recorder, txn_rec: Recorder, acked: list[int],
                    side: SideLoad | None) -> None:
    bootstrap = cluster.bootstrap_servers
    topics = {TOPIC: PARTITIONS, **{f"{TXN_TOPIC}-{r}": PARTITIONS for r in ("txn", "in", "out")}}
    load = WorkloadConfig(bootstrap, TOPIC, PARTITIONS, producers=2, consumers=0, rate=RATE, idempotence=True, seed=48)
    txns = TxnWorkloadConfig(bootstrap, TXN_TOPIC, PARTITIONS, producers=2, pipelines=1, readers=1, rate=4.0,
                             input_rate=8.0, seed=48)
    await create_topics(txns, 3, {"min.insync.replicas": "2"})

    async def share_from_the_start() -> None:
        async with AsyncAdmin(bootstrap) as admin:
            await admin.alter_configs(group=SHARE_GROUP, set_configs={"share.auto.offset.reset": "earliest"})

    await retried("setting share.auto.offset.reset", share_from_the_start)
    workload, txn_workload = Workload(load, rec), TxnWorkload(txns, txn_rec)
    if side is not None:
        await trio.to_thread.run_sync(side.start, bootstrap)
    async with trio.open_nursery() as nursery:
        await workload.run(nursery)
        await txn_workload.run(nursery)
        members = Members(bootstrap, run.journal, 1)
        await nursery.start(members.run)
        try:
            await _progress(acked, run.journal, ACKS_PER_STEP)
            for node_id in sorted(cluster.nodes):
                rec.record("nemesis", "info", "kill", {"phase": "start", "nodes": [node_id]})
                await trio.to_thread.run_sync(cluster.kill, node_id)
                await _progress(acked, run.journal, ACKS_PER_STEP)
                await trio.to_thread.run_sync(lambda n=node_id: cluster.start_node(n, wait=True, timeout=START_S))
                rec.record("nemesis", "info", "kill", {"phase": "stop", "nodes": [node_id]})
                await trio.to_thread.run_sync(cluster.wait_full_isr, topics, START_S)
                run.problems += await _missing_topics(cluster, topics, f"after the kill of node {node_id}")
                await _progress(acked, run.journal, ACKS_PER_STEP)
            mark = _confirmed(run.journal)
            await _restart_all(cluster, run, rec, topics, "after the first full restart")
            await _progress(acked, run.journal, ACKS_PER_STEP)
            run.across = (mark, _confirmed(run.journal))
            await members.leave()  # nothing changes the groups from here to the second restart
            run.before = await groups_seen(bootstrap)
            await _restart_all(cluster, run, rec, topics, "after the second full restart")
            run.after = await groups_seen(bootstrap)
            members = Members(bootstrap, run.journal, 2)
            await nursery.start(members.run)
            await _progress(acked, run.journal, ACKS_PER_STEP)
        except (TimeoutError, RuntimeError, trio.TooSlowError, AssertionError) as exc:
            run.problems.append(f"{type(exc).__name__}: {exc}")
        workload.stop_producing.set()
        txn_workload.stop_producing.set()
        if side is not None:
            run.side_history = await trio.to_thread.run_sync(side.stop)
        try:
            run.ends, run.final = await settled(bootstrap, SETTLE_S)
        except (trio.TooSlowError, AssertionError) as exc:
            run.problems.append(f"settling the groups: {type(exc).__name__}: {exc}")
        members.stop.set()
        if not await txn_workload.caught_up(SETTLE_S):
            run.problems.append("the pipeline did not commit the end of its input")
        workload.stop_consuming.set()
        txn_workload.stop_consuming.set()
    if not await drain(load, rec, timeout=60):
        run.problems.append(f"{TOPIC} could not be read to its end")
    if not await drain_txn(txns, txn_rec, timeout=60):
        run.problems.append("the transactions' topics could not be read to their end")


def run_scenario(directory: Path, side: SideLoad | None = None) -> Run:
    """The whole scenario on a cluster in `directory`, with `side`'s transactions too."""
    layout = readme_layouts(DOC.read_text())[0]  # the page's node block as written: Kafka's defaults
    cluster = ReadmeCluster(directory / "cluster", layout, readme_commands(DOC.read_text()))
    writer, txn_writer = HistoryWriter(directory / "history.jsonl"), HistoryWriter(directory / "txn.jsonl")
    acked = [0]

    def on_op(o: Op) -> None:
        if o.f == "send" and o.type == "ok":
            acked[0] += 1

    result = Run(Journal(), [], [])
    try:
        cluster.start()
        cluster.wait_ready(START_S)
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        trio.run(_scenario, cluster, result, Recorder(writer, on_op), Recorder(txn_writer), acked, side)
    finally:
        cluster.stop()
        writer.close()
        txn_writer.close()
    result.history = list(read_history(directory / "history.jsonl"))
    result.txn_history = list(read_history(directory / "txn.jsonl")) + result.side_history
    result.critical = [line for node in cluster.nodes.values() for line in critical_lines(node.log_path)]
    return result


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The whole scenario, once; each test checks one part of it."""
    return run_scenario(tmp_path_factory.mktemp("readme-groups"))


# --- the checks ----------------------------------------------------------------------------

def consumed_below_a_commit(journal: Journal) -> list[tuple[str, int, int, int]]:
    """(member, partition, offset, acknowledged commit) for each record a poll returned below an
    offset whose commit the coordinator had acknowledged before."""
    events = sorted([(s, "poll", m, {p: o}) for s, m, p, o, _ in journal.polls] +
                    [(s, "commit", m, offsets) for s, m, offsets in journal.commits], key=lambda e: e[0])
    committed: dict[int, int] = {}
    out = []
    for _, kind, member, offsets in events:
        for p, o in offsets.items():
            if kind == "commit":
                committed[p] = max(committed.get(p, 0), o)
            elif o < committed.get(p, 0):
                out.append((member, p, o, committed[p]))
    return out


def acknowledged_values(history: list[Op]) -> set[int]:
    return {int(o.value) for o in history if o.f == "send" and o.type == "ok"}


def redelivered_after_acceptance(journal: Journal) -> list[tuple[int, str, int]]:
    """(value, consumer, delivery count) for each delivery after the value's acceptance was confirmed."""
    accepted: set[int] = set()
    out = []
    for _, consumer, kind, value, count in journal.share:
        if kind == "OK":
            accepted.add(value)
        elif kind == "ACQ" and value in accepted:
            out.append((value, consumer, count))
    return out


def test_the_cluster_went_through_every_restart(run: Run) -> None:
    assert not run.problems, run.problems
    assert len(run.exit_codes) == 6 and all(code == 0 for code in run.exit_codes), \
        f"exit codes of the nodes stopped together with SIGTERM: {run.exit_codes}"
    assert not run.critical, run.critical[:5]
    result = check(run.history, idempotent=True)
    assert result.valid, result.to_json()
    assert result.stats["acknowledged"] >= ACKS_PER_STEP * 4, result.to_json()


def test_a_kip848_group_consumes_everything_and_its_commits_survive(run: Run) -> None:
    journal = run.journal
    assert run.before is not None and run.after is not None and run.final is not None, run.problems
    assert not isinstance(run.before.kip848, str) and not isinstance(run.final.kip848, str), \
        (run.before.kip848, run.final.kip848)
    state, epoch, offsets = run.before.kip848
    assert state == "Empty" and epoch and all(offsets.get(p) for p in range(PARTITIONS)), run.before
    assert run.after.kip848 == run.before.kip848, "the group (its epoch, its offsets) after the full restart"
    assert not consumed_below_a_commit(journal)[:10]
    consumed = {v for *_, v in journal.polls}
    assert not sorted(acknowledged_values(run.history) - consumed)[:20], "acknowledged records never consumed"
    assert run.final.kip848[2] == run.ends, (run.final.kip848, run.ends)
    (commits, _), (later, _) = run.across
    assert later > commits, ("no commit after the first full restart", journal.errors[-10:])


def test_a_share_group_accepts_everything_once_and_its_state_survives(run: Run) -> None:
    journal = run.journal
    assert run.before is not None and run.after is not None and run.final is not None, run.problems
    assert not isinstance(run.before.share, str) and not isinstance(run.final.share, str), \
        (run.before.share, run.final.share)
    state, epoch, starts = run.before.share
    assert state == "Empty" and epoch > 0 and all(starts.get(p, -1) > 0 for p in range(PARTITIONS)), run.before
    assert run.after.share == run.before.share, "the share group (its epoch, its start offsets) after the full restart"
    assert not redelivered_after_acceptance(journal)[:10]
    ok = [v for _, _, kind, v, _ in journal.share if kind == "OK"]
    assert len(ok) == len(set(ok)), "a value's acceptance confirmed twice"
    accepted = {v for _, _, kind, v, _ in journal.share if kind in ("OK", "UNKNOWN")}
    assert not sorted(acknowledged_values(run.history) - accepted)[:20], "acknowledged records never accepted"
    assert run.final.share[2] == run.ends, (run.final.share, run.ends)
    (_, accepted_before), (_, accepted_later) = run.across
    assert accepted_later > accepted_before, ("no acceptance after the first full restart", journal.errors[-10:])


def test_transactions_are_read_committed_once_or_not_at_all(run: Run) -> None:
    result = txn_checker.check(run.txn_history)
    assert result.valid, result.to_json()
    outcomes = result.stats["transactions"]
    assert outcomes.get("txn-committed", 0) >= 10 and outcomes.get("txn-aborted", 0) >= 2, result.stats
    assert outcomes.get("out-committed", 0) >= 5, result.stats  # the pipeline ran


def test_the_checks_see_what_they_guard() -> None:
    """The pure checks above find the anomalies they name."""
    journal = Journal()
    journal.polled("a", [(0, 0, 10), (0, 1, 11)])
    journal.committed("a", {0: 2})
    journal.polled("b", [(0, 2, 12)])
    assert not consumed_below_a_commit(journal)
    journal.polled("b", [(0, 1, 11)])
    assert consumed_below_a_commit(journal) == [("b", 0, 1, 2)]
    journal.shared("a", "ACQ", 10, 1)
    journal.shared("a", "UNKNOWN", 10)
    journal.shared("b", "ACQ", 10, 2)
    journal.shared("b", "OK", 10)
    assert not redelivered_after_acceptance(journal)
    journal.shared("c", "ACQ", 10, 3)
    assert redelivered_after_acceptance(journal) == [(10, "c", 3)]
