"""`raftka server start`: run one node until SIGTERM/SIGINT, then shut down cleanly."""

from __future__ import annotations

import signal
import sys

import click
import trio

from broker.node import BrokerNode
from raft_meta.metadata_loader import ClusterIdMismatch
from raft_meta.node_config import ConfigError, load_node_config
from raft_meta.quorum import QuorumError
from raft_meta.storage_format import StorageError

# Printed once the node serves clients; scripts and tests wait for this line.
READY_MARKER = "raftka node ready"


async def _serve(node: BrokerNode) -> None:
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await nursery.start(node.run)
            listeners = " ".join(f"{b.name}://{b.host}:{b.port}" for b in node.bound)
            click.echo(f"{READY_MARKER}: node.id={node.config.node_id} {listeners}", err=False)
            sys.stdout.flush()
            async for _ in signals:
                node.request_shutdown()
                break


def start(config_path: str) -> int:
    try:
        config = load_node_config(config_path)
    except ConfigError as exc:
        click.echo(f"raftka server start: {exc}", err=True)
        return 2
    node = BrokerNode(config)
    try:
        trio.run(_serve, node)
    except (StorageError, ClusterIdMismatch, QuorumError) as exc:
        click.echo(f"raftka server start: {exc}", err=True)
        return 1
    return 0
