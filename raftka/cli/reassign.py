"""`raftka reassign generate|execute|verify|cancel`: kafka-reassign-partitions.sh's options,
JSON files and output.

    raftka reassign generate --topics-to-move-json-file topics.json --broker-list 1,2,4
    raftka reassign execute --reassignment-json-file plan.json [--throttle BYTES/S]
    raftka reassign verify --reassignment-json-file plan.json
    raftka reassign cancel --reassignment-json-file plan.json

topics.json: `{"version": 1, "topics": [{"topic": "orders"}]}`. plan.json:
`{"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 4],
"log_dirs": ["any", "any"]}]}` (log_dirs is optional; only "any" is accepted: raftka has one
log directory per node). `generate` proposes an assignment of every partition of the topics
over the brokers of --broker-list with each topic's current replication factor (rack-aware
unless --disable-rack-aware), and changes nothing. `execute --throttle` sets the replication
throttles kafka-reassign-partitions sets (`throttle_configs`); `verify` (once every move is
complete) and `cancel` clear them, unless --preserve-throttles. Exit status: 0 done (verify: every
partition complete), 1 refused / unreachable / still in progress, 2 bad options or files.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import click
import trio

from raftka.cli.reassign_decisions import (
    Assignment,
    format_assignment,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    propose,
    throttle_configs,
    verify_lines,
)
from raftka.cli.runner import USAGE, Refused, UsageError, fail, run_with_cluster
from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError
from raftka.client.protocol import ErrorCode
from raftka.client.reassign_admin import (
    BROKER_RESOURCE,
    THROTTLE_RATE_KEYS,
    THROTTLED_REPLICAS_KEYS,
    TOPIC_RESOURCE,
    alter_configs_incrementally,
    alter_partition_reassignments,
    list_partition_reassignments,
)

T = TypeVar("T")
TIMEOUT_MS = 30000


async def _set_throttles(cluster: Cluster, plan: Assignment, current: Assignment, throttle: int) -> None:
    lists, brokers = throttle_configs(plan, current)
    changes: dict[tuple[int, str], dict[str, str | None]] = {
        (TOPIC_RESOURCE, topic): dict(zip(THROTTLED_REPLICAS_KEYS, pair, strict=True))
        for topic, pair in lists.items()}
    changes.update({(BROKER_RESOURCE, str(b)): dict.fromkeys(THROTTLE_RATE_KEYS, str(throttle)) for b in brokers})
    await retry_not_controller(lambda: alter_configs_incrementally(cluster, changes))
    click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")


async def _clear_throttles(cluster: Cluster, plan: Assignment) -> None:
    """kafka-reassign-partitions' clearAllThrottles: the rates of every broker (the live ones
    and the plan's) and the replica lists of the plan's topics."""
    metadata = await cluster.refresh_metadata(sorted({t for t, _ in plan}))
    brokers = sorted(set(metadata.brokers) | {b for replicas in plan.values() for b in replicas})
    topics = sorted({t for t, _ in plan})
    click.echo(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
               + ",".join(map(str, brokers)))
    click.echo(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} " + ",".join(topics))
    changes: dict[tuple[int, str], dict[str, str | None]] = {
        (BROKER_RESOURCE, str(b)): dict.fromkeys(THROTTLE_RATE_KEYS) for b in brokers}
    changes.update({(TOPIC_RESOURCE, t): dict.fromkeys(THROTTLED_REPLICAS_KEYS) for t in topics})
    await retry_not_controller(lambda: alter_configs_incrementally(cluster, changes))


# --- the commands ---------------------------------------------------------------------------


def _run(command: str, bootstrap: str, action: Callable[[Cluster], Awaitable[T]]) -> tuple[int, T | None]:
    return run_with_cluster(f"reassign {command}", bootstrap, action, timeout_ms=TIMEOUT_MS)


CONTROLLER_RETRY_S = 30.0


async def retry_not_controller(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, again while it fails with NOT_CONTROLLER (the controller role is moving; nothing
    was committed) for up to CONTROLLER_RETRY_S, as Kafka's admin client does."""
    deadline = trio.current_time() + CONTROLLER_RETRY_S
    while True:
        try:
            return await call()
        except KafkaError as exc:
            if exc.code != ErrorCode.NOT_CONTROLLER or trio.current_time() >= deadline:
                raise
        await trio.sleep(0.5)


async def _current(cluster: Cluster, topics: Sequence[str]) -> tuple[Assignment, dict[int, str | None]]:
    metadata = await cluster.refresh_metadata(list(topics))
    missing = [t for t in topics if t not in metadata.topics]
    if missing:
        raise Refused(f"topics {missing} do not exist")
    current = {(t, p): tuple(info.replicas) for t in topics for p, info in metadata.topics[t].partitions.items()}
    return current, {b.node_id: b.rack for b in metadata.brokers.values()}


def _read(path: str, parse: Callable[[str], T], command: str) -> T | None:
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read())
    except (OSError, UsageError) as exc:
        click.echo(f"raftka reassign {command}: {exc}", err=True)
        return None


def generate_cmd(bootstrap: str, topics_file: str, broker_list: str, disable_rack_aware: bool) -> int:
    topics = _read(topics_file, parse_topics_to_move, "generate")
    try:
        brokers = parse_broker_list(broker_list)
    except UsageError as exc:
        return fail("reassign generate", str(exc), USAGE)
    if topics is None:
        return USAGE

    async def action(cluster: Cluster) -> tuple[Assignment, Assignment]:
        current, racks = await _current(cluster, topics)
        try:
            return current, propose(current, racks, brokers, disable_rack_aware)
        except UsageError as exc:  # the brokers or topics the cluster has do not fit the list
            raise Refused(str(exc)) from None

    status, result = _run("generate", bootstrap, action)
    if result is not None:
        current, proposed = result
        click.echo(f"Current partition replica assignment\n{format_assignment(current)}\n")
        click.echo(f"Proposed partition reassignment configuration\n{format_assignment(proposed)}")
    return status


def execute_cmd(bootstrap: str, plan_file: str, throttle: int) -> int:
    plan = _read(plan_file, parse_reassignment, "execute")
    if plan is None:
        return USAGE

    async def action(cluster: Cluster):
        current, _ = await _current(cluster, sorted({t for t, _ in plan}))
        unknown = sorted(f"{t}-{p}" for t, p in plan if (t, p) not in current)
        if unknown:
            raise Refused(f"partitions {unknown} do not exist")
        ongoing = await list_partition_reassignments(cluster, list(plan))
        if ongoing:
            raise Refused("a reassignment is already in progress for " + ", ".join(
                f"{t}-{p}" for t, p in sorted(ongoing)) + "; cancel it or wait (raftka reassign verify)")
        click.echo("Current partition replica assignment\n\n"
                   f"{format_assignment({k: current[k] for k in plan})}\n\n"
                   "Save this to use as the --reassignment-json-file option during rollback")
        if throttle >= 0:
            click.echo("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                       "the throttle is removed.")
            await _set_throttles(cluster, plan, current, throttle)
        return await retry_not_controller(lambda: alter_partition_reassignments(cluster, plan))

    status, results = _run("execute", bootstrap, action)
    if results is None:
        return status
    failed = {k: e for k, e in results.items() if e is not None}
    started = [f"{t}-{p}" for t, p in sorted(plan) if (t, p) not in failed]
    if started:
        click.echo("Successfully started partition reassignments for " + ",".join(started))
    for (t, p), error in sorted(failed.items()):
        click.echo(f"Error reassigning partition {t}-{p}: {type(error).__name__}: {error}", err=True)
    return 1 if failed else 0


def verify_cmd(bootstrap: str, plan_file: str, preserve_throttles: bool = False) -> int:
    plan = _read(plan_file, parse_reassignment, "verify")
    if plan is None:
        return USAGE

    async def action(cluster: Cluster):
        metadata = await cluster.refresh_metadata(sorted({t for t, _ in plan}))
        current = {(t, p): tuple(info.replicas) for t, topic in metadata.topics.items()
                   for p, info in topic.partitions.items()}
        ongoing = await list_partition_reassignments(cluster, list(plan))
        lines, done = verify_lines(plan, current, ongoing)
        click.echo("Status of partition reassignment:\n" + "\n".join(lines))
        if done and not preserve_throttles:  # Kafka clears them once every move is complete
            await _clear_throttles(cluster, plan)
        return done

    status, done = _run("verify", bootstrap, action)
    if done is None:
        return status
    return 0 if done else 1


def cancel_cmd(bootstrap: str, plan_file: str, preserve_throttles: bool = False) -> int:
    plan = _read(plan_file, parse_reassignment, "cancel")
    if plan is None:
        return USAGE

    async def action(cluster: Cluster):
        results = await retry_not_controller(lambda: alter_partition_reassignments(cluster, dict.fromkeys(plan)))
        if not preserve_throttles:
            await _clear_throttles(cluster, plan)
        return results

    status, results = _run("cancel", bootstrap, action)
    if results is None:
        return status
    cancelled = [f"{t}-{p}" for (t, p), e in sorted(results.items()) if e is None]
    idle = [f"{t}-{p}" for (t, p), e in sorted(results.items()) if e is not None and e.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    failed = {k: e for k, e in results.items() if e is not None and e.code != ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    if cancelled:
        click.echo("Successfully cancelled partition reassignments for: " + ",".join(cancelled))
    if idle:
        click.echo("No reassignment was in progress for: " + ",".join(idle))
    for (t, p), error in sorted(failed.items()):
        click.echo(f"Error cancelling the reassignment of {t}-{p}: {type(error).__name__}: {error}", err=True)
    return 1 if failed else 0
