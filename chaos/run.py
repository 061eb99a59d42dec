"""One chaos run: cluster up, workload under the nemesis schedule, heal, drain, check, report.

The run directory (`<out>/<timestamp>/`) gets history.jsonl, schedule.json,
results.json, the plots and `cluster/node-<i>/server.log` (each node's log).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import structlog
import trio

from raftka.chaos.checker import CheckResult, check
from raftka.chaos.cluster import ProxiedCluster, find_port_base
from raftka.chaos.history import HistoryWriter, Op, read_history
from raftka.chaos.metadata_probe import (
    CRITICAL_KEEP,
    converged,
    critical_lines,
    direct_config,
    sample_node_metadata,
    sample_quorum,
)
from raftka.chaos.metadata_workload import MetadataWorkload, MetadataWorkloadConfig
from raftka.chaos.nemesis import Fault, Nemesis, make_schedule
from raftka.chaos.workload import Recorder, Workload, WorkloadConfig, drain
from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.errors import TopicAlreadyExistsError

log = structlog.get_logger("chaos.run")


@dataclass(frozen=True)
class RunConfig:
    out: Path
    nodes: int = 5
    time_limit: float = 60.0
    nemeses: tuple[str, ...] = ("kill", "pause", "partition")
    interval: float = 10.0
    rate: float = 50.0
    topic: str = "chaos"
    partitions: int = 3
    replication_factor: int = 3
    min_insync: int = 2
    acks: str = "all"
    idempotence: bool = False
    seed: int = 0
    against: str | None = None
    producers: int = 3
    consumers: int = 2
    partition_mode: str = "cut"
    extra_config: dict[str, str] = field(default_factory=dict)
    settle: float = 3.0  # seconds consumers keep reading after the heal, before the drain
    consumer_mode: str = "assign"  # assign | group
    # The chaos topic's segment.bytes: small, so segments roll and the corrupt nemesis finds
    # closed ones (a 3-partition topic at 50 sends/s rolls about every 15 s at 16 KiB).
    segment_bytes: int | None = 16384
    whole_timeout: float = 60.0
    # The metadata side (chaos/metadata_*.py): topic creations/deletions every this many
    # seconds, each node's metadata sampled every `probe_interval`, the voters' image digests
    # every `quorum_probe_interval` (a `raftka quorum status` subprocess).
    metadata_interval: float = 2.0
    probe_interval: float = 1.0
    quorum_probe_interval: float = 5.0
    converge_timeout: float = 60.0
    security: Any = None  # client/security.py ClientSecurity, for --against a secured cluster
    workload: str = "queue"  # queue | txn (chaos/txn_workload.py, checked by chaos/txn_checker.py)


@dataclass(frozen=True)
class RunResult:
    directory: Path
    check: CheckResult
    schedule: list[Fault]
    drained: bool


def run_directory(out: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = out / stamp
    n = 1
    while path.exists():
        n += 1
        path = out / f"{stamp}-{n}"
    path.mkdir(parents=True)
    return path


def topic_config(config: RunConfig) -> dict[str, str]:
    out = {"min.insync.replicas": str(config.min_insync)}
    if config.segment_bytes is not None:
        out["segment.bytes"] = str(config.segment_bytes)
    return out


async def _create_topic(config: RunConfig, bootstrap: str, timeout: float = 30.0) -> None:
    deadline = trio.current_time() + timeout
    async with AsyncAdmin(bootstrap, security=config.security) as admin:
        try:
            await admin.create_topics([NewTopic(config.topic, config.partitions, config.replication_factor,
                                                topic_config(config))])
        except TopicAlreadyExistsError:
            pass
        while True:  # every partition led with a full ISR
            try:
                (desc,) = await admin.describe_topics([config.topic])
                if len(desc.partitions) == config.partitions and all(
                        p.leader >= 0 and len(p.isr) == config.replication_factor for p in desc.partitions):
                    return
            except Exception:  # metadata still propagating
                pass
            if trio.current_time() > deadline:
                raise TimeoutError(f"topic {config.topic} has no leader and full ISR on every partition "
                                   f"after {timeout}s")
            await trio.sleep(0.2)


async def _wait_whole(cluster: ProxiedCluster | None, config: RunConfig, bootstrap: str) -> None:
    if cluster is not None:
        await trio.to_thread.run_sync(cluster.wait_ready, config.whole_timeout)
    await _create_topic(config, bootstrap, config.whole_timeout)


def run(config: RunConfig, on_op: Callable[[Op], None] | None = None,
        on_phase: Callable[[str], None] | None = None) -> RunResult:
    """Run everything; the cluster is always stopped, even on error."""
    directory = run_directory(config.out)
    phase = on_phase or (lambda text: log.info("chaos.phase", phase=text))
    kinds = () if config.against else config.nemeses
    schedule = make_schedule(config.seed, kinds, config.time_limit, config.interval, config.nodes)
    (directory / "schedule.json").write_text(json.dumps([asdict(f) for f in schedule], indent=1))
    (directory / "config.json").write_text(json.dumps({**asdict(config), "out": str(config.out)}, indent=1))
    cluster: ProxiedCluster | None = None
    writer = HistoryWriter(directory / "history.jsonl")
    rec = Recorder(writer, on_op)
    drained = False
    try:
        if config.against:
            bootstrap = config.against
        else:
            phase(f"starting {config.nodes} nodes")
            extra = {"min.insync.replicas": str(config.min_insync), **config.extra_config}
            cluster = ProxiedCluster(directory / "cluster", config.nodes,
                                     port_base=find_port_base(config.nodes), extra_config=extra)
            cluster.start()
            cluster.wait_ready(config.whole_timeout)
            bootstrap = cluster.bootstrap_servers
        main = _main_txn if config.workload == "txn" else _main
        drained = trio.run(main, config, cluster, bootstrap, schedule, rec, phase)
    finally:
        try:
            if cluster is not None:
                phase("stopping the cluster")
                cluster.stop(timeout=15)
                scan_logs(cluster, rec)
        finally:
            writer.close()
    phase("checking")
    if config.workload == "txn":
        from raftka.chaos import txn_checker

        result = txn_checker.check(read_history(directory / "history.jsonl"))
    else:
        result = check(read_history(directory / "history.jsonl"), idempotent=config.idempotence)
    from raftka.chaos.report import write_report

    write_report(directory, result, read_history(directory / "history.jsonl"), config)
    return RunResult(directory, result, schedule, drained)


async def _main(config: RunConfig, cluster: ProxiedCluster | None, bootstrap: str, schedule: list[Fault],
                rec: Recorder, phase: Callable[[str], None]) -> bool:
    rec.record("harness", "info", "config", {"idempotence": config.idempotence, "acks": config.acks,
                                            "seed": config.seed, "nodes": config.nodes,
                                            "nemeses": list(config.nemeses), "partitions": config.partitions,
                                            "consumer_mode": config.consumer_mode,
                                            "segment_bytes": config.segment_bytes})
    await _create_topic(config, bootstrap)
    wl_config = WorkloadConfig(bootstrap, config.topic, config.partitions, config.producers, config.consumers,
                               config.rate, config.acks, config.idempotence, config.seed,
                               consumer_mode=config.consumer_mode, group_id=f"chaos-{config.seed}",
                               security=config.security)
    workload = Workload(wl_config, rec)
    nemesis = Nemesis(cluster, rec, config.topic, config.partition_mode) if cluster is not None else None
    meta_workload = MetadataWorkload(MetadataWorkloadConfig(
        bootstrap, config.seed, config.metadata_interval, min(config.replication_factor, config.nodes)), rec)
    probing = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        await workload.run(nursery)
        if cluster is not None:
            nursery.start_soon(meta_workload.run)
            nursery.start_soon(_probe, cluster, config, rec, probing)
        await _faults_then_heal(config, schedule, nemesis, phase)
        workload.stop_producing.set()
        meta_workload.stop.set()
        phase("waiting for the cluster to be whole")
        try:
            await _wait_whole(cluster, config, bootstrap)
        except Exception as exc:  # still drain what we can; the checker reports the rest as unseen
            rec.record("harness", "info", "whole", {"error": repr(exc)})
        if cluster is not None:
            phase("waiting for the voters' metadata images to converge")
            probing.cancel()
            await meta_workload.finished.wait()  # every topic change has its outcome first
            await _final_metadata(cluster, config, rec)
        if nemesis is not None and nemesis.corruptions:
            phase("checking that corrupted nodes reported the damage")
            await nemesis.check_corruptions()
        await trio.sleep(config.settle)
        workload.stop_consuming.set()
    phase("draining every partition")
    return await drain(wl_config, rec, timeout=max(30.0, config.whole_timeout))


async def _faults_then_heal(config: RunConfig, schedule: list[Fault], nemesis: Nemesis | None,
                           phase: Callable[[str], None]) -> None:
    """The fault window: the schedule for `time_limit` seconds, then every fault undone."""
    phase(f"faults for {config.time_limit:.0f}s ({len(schedule)} scheduled)")
    t0 = trio.current_time()
    if nemesis is not None and schedule:
        with trio.move_on_after(config.time_limit + 10 * config.interval):
            await nemesis.run(schedule, t0)
    await trio.sleep_until(t0 + config.time_limit)
    phase("healing")
    if nemesis is not None:
        await nemesis.heal_all()


async def _main_txn(config: RunConfig, cluster: ProxiedCluster | None, bootstrap: str,
                    schedule: list[Fault], rec: Recorder, phase: Callable[[str], None]) -> bool:
    """The transactional workload under the same schedule: faults, heal, let the pipelines
    catch up, drain read_committed."""
    from raftka.chaos.txn_workload import TxnWorkload, TxnWorkloadConfig, create_topics, drain_txn

    rec.record("harness", "info", "config", {"workload": "txn", "seed": config.seed,
                                            "nodes": config.nodes, "nemeses": list(config.nemeses),
                                            "partitions": config.partitions})
    wl_config = TxnWorkloadConfig(bootstrap, config.topic, config.partitions, seed=config.seed,
                                  rate=max(1.0, config.rate / 5), input_rate=max(1.0, config.rate / 2),
                                  group_id=f"chaos-ctp-{config.seed}", security=config.security)
    replication = min(config.replication_factor, config.nodes)
    await create_topics(wl_config, replication, topic_config(config), config.whole_timeout)
    workload = TxnWorkload(wl_config, rec)
    nemesis = Nemesis(cluster, rec, wl_config.topic_for("txn"), config.partition_mode) \
        if cluster is not None else None
    async with trio.open_nursery() as nursery:
        await workload.run(nursery)
        await _faults_then_heal(config, schedule, nemesis, phase)
        workload.stop_producing.set()
        if cluster is not None:
            phase("waiting for the cluster to be whole")
            try:
                await trio.to_thread.run_sync(cluster.wait_ready, config.whole_timeout)
            except Exception as exc:
                rec.record("harness", "info", "whole", {"error": repr(exc)})
        phase("waiting for the pipelines to consume every input")
        caught_up = await workload.caught_up(max(30.0, config.whole_timeout))
        rec.record("harness", "info", "caught-up", {"caught_up": caught_up})
        await trio.sleep(config.settle)
        workload.stop_consuming.set()
    phase("draining every topic read_committed")
    return await drain_txn(wl_config, rec, timeout=max(30.0, config.whole_timeout))


async def _probe(cluster: ProxiedCluster, config: RunConfig, rec: Recorder, scope: trio.CancelScope) -> None:
    """Sample every node's metadata and the voters' image digests until cancelled."""

    async def node_loop(node_id: int) -> None:
        while True:
            await sample_node_metadata(cluster.nodes[node_id], rec)
            await trio.sleep(config.probe_interval)

    async def quorum_loop() -> None:
        config_path = direct_config(cluster)
        while True:
            await sample_quorum(config_path, rec)
            await trio.sleep(config.quorum_probe_interval)

    with scope:
        async with trio.open_nursery() as nursery:
            for node_id in cluster.nodes:
                nursery.start_soon(node_loop, node_id)
            nursery.start_soon(quorum_loop)


async def _final_metadata(cluster: ProxiedCluster, config: RunConfig, rec: Recorder) -> None:
    """After the heal: wait until every voter reports one image offset and its digest (the
    checker compares the digests), then record each node's final metadata (its topics)."""
    config_path = direct_config(cluster)
    deadline = trio.current_time() + config.converge_timeout
    voters = None
    while trio.current_time() < deadline:
        voters = await sample_quorum(config_path, rec, final=True)
        if converged(voters, len(cluster.nodes)):
            break
        await trio.sleep(0.5)
    ok = converged(voters, len(cluster.nodes))
    answered = {v.get("node_id") for v in voters or () if v.get("reachable")}
    rec.record("harness", "info", "metadata-final", {"converged": ok, "voters": voters or [],
                                                    "missing_nodes": sorted(set(cluster.nodes) - answered)})
    await trio.sleep(config.settle)  # the brokers publish the converged image
    deadline = trio.current_time() + 30

    async def final_sample(node) -> None:
        while not await sample_node_metadata(node, rec, final=True) and trio.current_time() < deadline:
            await trio.sleep(0.5)

    async with trio.open_nursery() as nursery:
        for _, node in sorted(cluster.nodes.items()):
            nursery.start_soon(final_sample, node)


def scan_logs(cluster: ProxiedCluster, rec: Recorder) -> None:
    """One `log-scan` op per node: the CRITICAL lines of its log (the checker fails on any)."""
    for node_id, node in sorted(cluster.nodes.items()):
        lines = list(critical_lines(node.log_path))
        rec.record("harness", "info", "log-scan", {"node": node_id, "critical": lines[:CRITICAL_KEEP],
                                                   "count": len(lines)})
