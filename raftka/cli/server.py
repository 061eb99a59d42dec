"""`raftka server start`: run one node until SIGTERM/SIGINT, then shut down cleanly."""

from __future__ import annotations

import os
import signal
import sys

import click
import trio

from raftka.broker.node import BrokerNode, raise_descriptor_limit
from raftka.log.dir_lock import DirLocked, lock_dirs
from raftka.raft_meta.config.node_config import ConfigError, NodeConfig, load_node_config
from raftka.raft_meta.metadata.metadata_loader import ClusterIdMismatch
from raftka.raft_meta.quorum.quorum import QuorumError
from raftka.raft_meta.quorum.storage_format import StorageError, format_storage
from raftka.testing.local_cluster import EXIT_WITH_PARENT_ENV, READY_MARKER

PARENT_CHECK_INTERVAL_S = 0.25


async def _shutdown_when_orphaned(node: BrokerNode, parent_pid: int) -> None:
    """Shut the node down once its launcher is gone (kill -9 included): the launcher's
    children are re-parented, so getppid() stops naming it."""
    while os.getppid() == parent_pid:
        await trio.sleep(PARENT_CHECK_INTERVAL_S)
    click.echo(f"raftka server start: launcher pid {parent_pid} is gone; shutting down", err=True)
    node.request_shutdown()


async def _shutdown_on_signal(node: BrokerNode, task_status=trio.TASK_STATUS_IGNORED) -> None:
    # The receiver belongs to this task: held by _serve instead, a start-up failure closed it
    # under this loop, which then added "open_signal_receiver block already exited" to the error.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            node.request_shutdown()


class _PrintReady:
    """The task status node.run reports to: prints the ready marker scripts wait for."""

    def started(self, node: BrokerNode) -> None:
        listeners = " ".join(f"{b.name}://{b.host}:{b.port}" for b in node.bound)
        click.echo(f"{READY_MARKER}: node.id={node.config.node_id} {listeners}", err=False)
        sys.stdout.flush()


async def _serve(node: BrokerNode, parent_pid: int | None) -> None:
    """Run the node until SIGTERM/SIGINT or its launcher's death; a shutdown asked for during
    start-up ends start-up at once (BrokerNode.run)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(_shutdown_on_signal, node)
        if parent_pid is not None:
            nursery.start_soon(_shutdown_when_orphaned, node, parent_pid)
        await node.run(task_status=_PrintReady())
        nursery.cancel_scope.cancel()


def _parent_pid() -> int | None:
    value = os.environ.get(EXIT_WITH_PARENT_ENV, "")
    return int(value) if value.isdigit() else None


def start(config_path: str, format_cluster_id: str | None = None) -> int:
    try:
        config = load_node_config(config_path)
    except ConfigError as exc:
        click.echo(f"raftka server start: {exc}", err=True)
        return 2
    try:
        # Held for the process's life: two nodes on one log dir would corrupt it.
        with lock_dirs([*config.log_dirs, config.metadata_log_dir]):
            return _start_locked(config, format_cluster_id)
    except DirLocked as exc:
        click.echo(f"raftka server start: {exc}", err=True)
        return 1


def _start_locked(config: NodeConfig, format_cluster_id: str | None) -> int:
    raise_descriptor_limit()
    try:
        if format_cluster_id is not None:
            format_storage(config, format_cluster_id, ignore_formatted=True)
        trio.run(_serve, BrokerNode(config), _parent_pid())
    except _FATAL as exc:
        click.echo(f"raftka server start: {exc}", err=True)
        return 1
    except BaseExceptionGroup as group:  # raised inside the node's nurseries
        fatal, rest = group.split(_FATAL)
        if fatal is None or rest is not None:
            raise
        click.echo(f"raftka server start: {_first_leaf(fatal)}", err=True)
        return 1
    return 0


# Failures a node reports as one line (a config, storage or quorum problem), not a traceback.
_FATAL = (StorageError, ClusterIdMismatch, QuorumError)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group
