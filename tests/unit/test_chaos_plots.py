"""The chaos plots say what happened (#31): the verdict in the title, the node each fault hit,
and what "send info" means."""

from __future__ import annotations

from pathlib import Path

from raftka.chaos.history import NEMESIS, Op
from raftka.chaos.report import fault_targets, plot

OPS = [
    Op(0, "invoke", "send", 1, time=0.1), Op(0, "ok", "send", 1, time=0.2),
    Op(NEMESIS, "info", "kill", {"id": 7, "phase": "start", "nodes": [2]}, time=0.5),
    Op(0, "invoke", "send", 2, time=0.6), Op(0, "info", "send", 2, time=1.6),
    Op(NEMESIS, "info", "kill", {"id": 7, "phase": "stop"}, time=2.0),
    Op(NEMESIS, "info", "partition", {"id": 8, "phase": "start", "nodes": [1, 3]}, time=2.5),
    Op(0, "invoke", "send", 3, time=2.6), Op(0, "fail", "send", 3, time=2.7),
]


def test_fault_targets_name_the_nodes():
    assert fault_targets(OPS) == {"7": "n2", "8": "n1,n3"}


def test_plots_carry_the_verdict_the_victims_and_a_legend_for_info(tmp_path: Path):
    texts = plot(tmp_path, OPS, "chaos run 20261127T0900: INVALID")
    assert (tmp_path / "latency.png").stat().st_size > 0 and (tmp_path / "throughput.png").stat().st_size > 0
    assert "chaos run 20261127T0900: INVALID: send latency" in texts
    assert "chaos run 20261127T0900: INVALID: throughput" in texts
    assert {"kill n2", "partition n1,n3"} <= set(texts)
    assert "send info (indeterminate: may or may not be written)" in texts
