"""A one-node raftka server as a real process for the SDK tests, and how tests run the CLI."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from raftka.testing.local_cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
RAFTKA = [sys.executable, "-m", "raftka"]


def raftka_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAFTKA_LOG_LEVEL": "WARNING"}


@contextmanager
def one_node_server(directory: Path, *, num_partitions: int = 1,
                    start_timeout: float = 30.0) -> Iterator[str]:
    """A started one-node cluster's bootstrap address; the node is stopped on exit."""
    cluster = LocalCluster(directory, 1, log_level="WARNING", extra_config={
        "num.partitions": str(num_partitions), "group.initial.rebalance.delay.ms": "0"})
    try:
        cluster.start_and_wait(start_timeout)
        yield cluster.bootstrap
    finally:
        cluster.stop(timeout=15)
