"""A bounded soak on Kafka's default layout (the metadata log in the first log dir, as
`LocalCluster` and docs/operations.md lay nodes out): kill -9, pause (SIGSTOP/SIGCONT) and clean
restarts (SIGTERM, start) of random nodes under an idempotent acks=all load, through the
chaos harness (chaos/run.py, chaos/nemesis.py, chaos/checker.py). Every acknowledged record
is read back, none twice.

The seed comes from RAFTKA_SOAK_SEED, else the clock, and is printed (and named in every
failure) so a failing run replays:
    RAFTKA_SOAK_SEED=<seed> .venv/bin/python -m pytest tests/chaos/test_restart_soak.py
"""

from __future__ import annotations

import os
import time

import pytest

from raftka.chaos.history import read_history
from raftka.chaos.run import RunConfig, run

SEED_ENV = "RAFTKA_SOAK_SEED"
KINDS = ("kill", "pause", "restart")


def soak_seed() -> int:
    text = os.environ.get(SEED_ENV, "").strip()
    return int(text) if text else time.time_ns() % (1 << 31)


@pytest.mark.timeout(600)  # about 65 s when it passes; a failing run waits out its heal and drain
def test_kill_pause_and_clean_restarts_of_random_nodes_lose_nothing(tmp_path):
    seed = soak_seed()
    print(f"restart soak: seed {seed} (replay: {SEED_ENV}={seed})")
    # 45 s of faults, one every 7.5 s (each held 5 s): six, each kind twice, on seeded nodes.
    config = RunConfig(out=tmp_path, nodes=3, time_limit=45, nemeses=KINDS, interval=5, rate=40,
                       partitions=3, idempotence=True, seed=seed)
    result = run(config)
    replay = f"seed {seed} ({SEED_ENV}={seed}), run {result.directory}"
    summary = result.check.to_json()
    assert result.check.valid, (replay, summary)  # no loss, no duplicate (idempotent), order kept
    assert result.drained, (replay, summary)
    assert result.check.stats["acknowledged"] > 100, (replay, summary)
    history = read_history(result.directory / "history.jsonl")
    done = {(o.f, o.value.get("phase")) for o in history if o.process == "nemesis" and isinstance(o.value, dict)}
    assert {(kind, phase) for kind in KINDS for phase in ("start", "stop")} <= done, (replay, done)
    for i in range(1, config.nodes + 1):  # the layout under test: Kafka's default
        node_dir = result.directory / "cluster" / f"node-{i}"
        assert (node_dir / "data" / "__cluster_metadata-0" / "raft.journal").exists(), replay
        assert not (node_dir / "meta").exists(), replay
