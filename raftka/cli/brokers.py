"""`raftka brokers drain --node N`: move every replica off a broker (by reassignments), so it can
be stopped and unregistered (`raftka brokers unregister --id N`, like `kafka-cluster
unregister`) with nothing lost.

For each partition with a replica on N, that replica is replaced by the live broker, not already
a replica, that holds the fewest replicas so far (ties: the lowest id); N's position in the list
is kept, so a drained leader's partition prefers its replacement only where N was preferred.
The plan is printed in kafka-reassign-partitions' JSON (a rollback file), started, and, unless
--no-wait, followed until every partition has finished. Exit 0 done, 1 refused / unreachable /
not finished in --timeout, 2 bad options.

`raftka brokers rebalance` evens out the replicas per live broker with the fewest moves (a
broker just added holds none): while the most loaded live broker holds at least two replicas
more than the least loaded, one replica moves from the former to the latter, keeping its
position in the list (a partition that preferred the donor prefers the new broker, which then
takes its leadership once the move is done: preferred-leader balancing). It is printed, started
and followed as a drain is.
"""

from __future__ import annotations

import click
import trio

from raftka.cli.reassign import retry_not_controller
from raftka.cli.reassign_decisions import Assignment, format_assignment, plan_drain, plan_rebalance
from raftka.cli.runner import run_with_cluster
from raftka.client.cluster import Cluster
from raftka.client.cluster_admin import unregister_broker
from raftka.client.errors import KafkaError
from raftka.client.protocol import ErrorCode
from raftka.client.reassign_admin import alter_partition_reassignments, list_partition_reassignments

TIMEOUT_MS = 30000


async def _start_and_follow(cluster: Cluster, plan: Assignment, current: Assignment, wait: bool,
                            timeout_s: float, done: str, what: str = "") -> int:
    """Print the rollback file, start the moves of `plan`, and (with `wait`) follow them to the end."""
    click.echo("Current partition replica assignment\n\n"
               f"{format_assignment({k: current[k] for k in plan})}\n\n"
               "Save this to use as the --reassignment-json-file option during rollback")
    results = await retry_not_controller(lambda: alter_partition_reassignments(cluster, plan))
    failed = {k: e for k, e in results.items() if e is not None}
    for (t, p), error in sorted(failed.items()):
        click.echo(f"Error reassigning partition {t}-{p}: {type(error).__name__}: {error}", err=True)
    started = [k for k in plan if k not in failed]
    click.echo(f"Started moving {len(started)} partition(s){what}.")
    if not wait or not started:
        return 1 if failed else 0
    with trio.move_on_after(timeout_s):
        while await list_partition_reassignments(cluster, started):
            await trio.sleep(0.5)
        click.echo(done)
        return 1 if failed else 0
    click.echo(f"Still moving after {timeout_s:g} s; follow with raftka reassign verify", err=True)
    return 1


def rebalance_cmd(bootstrap: str, wait: bool, timeout_s: float) -> int:
    async def action(cluster: Cluster) -> int:
        metadata = await cluster.refresh_metadata(all_topics=True)
        current = {(t, p): tuple(info.replicas) for t, topic in metadata.topics.items()
                   for p, info in topic.partitions.items()}
        plan = plan_rebalance(current, sorted(metadata.brokers))
        if not plan:
            click.echo(f"The replicas are already even over brokers {sorted(metadata.brokers)}.")
            return 0
        return await _start_and_follow(cluster, plan, current, wait, timeout_s,
                                       f"Balanced over brokers {sorted(metadata.brokers)}: "
                                       "none of the partitions is moving any more.")

    return _run("rebalance", bootstrap, action)


def _run(command: str, bootstrap: str, action) -> int:
    status, result = run_with_cluster(f"brokers {command}", bootstrap, action, timeout_ms=TIMEOUT_MS)
    return status or result


RETRY_S = 30.0  # NOT_CONTROLLER (the controller role is moving) is retried this long


def unregister_cmd(bootstrap: str, broker_id: int) -> int:
    async def action(cluster: Cluster) -> int:
        retried = False
        with trio.move_on_after(RETRY_S):
            while True:
                try:
                    await unregister_broker(cluster, broker_id)
                    break
                except KafkaError as exc:
                    if exc.code == ErrorCode.BROKER_ID_NOT_REGISTERED and retried:
                        break  # an earlier attempt did commit before the controller moved
                    if exc.code != ErrorCode.NOT_CONTROLLER:
                        raise
                    retried = True
                    await trio.sleep(0.5)
            click.echo(f"Broker {broker_id} is no longer registered.")
            return 0
        click.echo(f"raftka brokers unregister: no active controller answered within {RETRY_S:g} s", err=True)
        return 1

    return _run("unregister", bootstrap, action)


def drain_cmd(bootstrap: str, node: int, wait: bool, timeout_s: float) -> int:
    async def action(cluster: Cluster) -> int:
        metadata = await cluster.refresh_metadata(all_topics=True)
        if node not in metadata.brokers:
            click.echo(f"note: broker {node} is not live; its replicas are moved anyway", err=True)
        current = {(t, p): tuple(info.replicas) for t, topic in metadata.topics.items()
                   for p, info in topic.partitions.items()}
        plan, stuck = plan_drain(current, sorted(metadata.brokers), node)
        for (t, p), why in sorted(stuck.items()):
            click.echo(f"Cannot move {t}-{p} off broker {node}: {why}", err=True)
        if not plan:
            click.echo(f"Broker {node} holds no replicas" + (" that can move." if stuck else "."))
            return 1 if stuck else 0
        code = await _start_and_follow(cluster, plan, current, wait, timeout_s,
                                       f"Broker {node} is drained: none of its partitions is moving any more.",
                                       f" off broker {node}")
        return 1 if stuck else code

    return _run("drain", bootstrap, action)
