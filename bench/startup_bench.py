"""raftka as a library: import cost, 1-node start to the first acknowledged produce, and the
pytest plugin's fixture set-up. Median (min-max) of 5 runs each.

- `import raftka`, `import raftka.client.protocol` and `from raftka import Producer`:
  a fresh interpreter each run, the time of the import statement itself.
- 1 node, launch to first ack: from `Popen` of `raftka server start --format` (storage
  formatted in the same process, as `LocalCluster` does it) to the delivery report of an
  acks=all confluent-kafka produce to a topic the broker auto-creates. The producer is
  made when the node prints its ready line, in this (already warm) process.
- Fixture set-up: a pytest session in a temp folder whose one test asks for
  `raftka_bootstrap`; pytest's own `--durations` figure for that set-up.

Run alone: .venv/bin/python -m bench.startup_bench
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RUNS = 5


@dataclass(frozen=True)
class Row:
    case: str
    seconds: list[float]

    def cell(self) -> str:
        ms = [s * 1000 for s in self.seconds]
        return f"{statistics.median(ms):.0f} ms ({min(ms):.0f}-{max(ms):.0f})"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}


def _import_seconds(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    with tempfile.TemporaryDirectory() as cwd:  # not the repository root
        out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_clean_env(), check=True,
                             capture_output=True, text=True).stdout
    return float(out.strip())


def _first_ack_seconds(directory: Path) -> float:
    from confluent_kafka import Producer

    from raftka.testing.local_cluster import LocalCluster

    cluster = LocalCluster(directory, 1, log_level="WARNING")
    cluster.prepare()
    node = cluster.nodes[1]
    start = time.perf_counter()
    cluster.start_node(1)
    try:
        if not node.ready.wait(60):
            raise RuntimeError(f"node not ready; see {node.log_path}")
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                             "topic.metadata.refresh.fast.interval.ms": 10, "log.connection.close": False})
        done: list = []
        producer.produce("first-ack", b"x", on_delivery=lambda err, _msg: done.append(err))
        while not done:
            producer.poll(0.001)
        elapsed = time.perf_counter() - start
        del producer  # closed before the node stops
        if done != [None]:
            raise RuntimeError(f"first produce failed: {done[0]}")
        return elapsed
    finally:
        cluster.stop()


_APP_TEST = "def test_one(raftka_bootstrap):\n    assert raftka_bootstrap\n"


def _fixture_setup_seconds(directory: Path) -> float:
    (directory / "test_app.py").write_text(_APP_TEST)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=1",
                          "--durations-min=0", f"--basetemp={directory / 'tmp'}", "test_app.py"],
                         cwd=directory, env=_clean_env(), capture_output=True, text=True, timeout=120).stdout
    match = re.search(r"([\d.]+)s setup\s+test_app.py::test_one", out)
    if match is None:
        raise RuntimeError(f"no set-up duration in pytest's output:\n{out}")
    return float(match.group(1))


def run(runs: int = RUNS) -> list[Row]:
    rows = [Row(f"`{s}`", [_import_seconds(s) for _ in range(runs)]) for s in (
        "import raftka", "import raftka.client.protocol", "from raftka import Producer")]
    with tempfile.TemporaryDirectory(prefix="raftka-startup-") as tmp:
        acks = [_first_ack_seconds(Path(tmp) / f"ack-{i}") for i in range(runs)]
        rows.append(Row("1 node: launch to first acks=all ack (auto-created topic)", acks))
        fixtures = []
        for i in range(runs):
            (Path(tmp) / f"app-{i}").mkdir()
            fixtures.append(_fixture_setup_seconds(Path(tmp) / f"app-{i}"))
        rows.append(Row("pytest plugin: `raftka_bootstrap` set-up (1 node)", fixtures))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = ["| what | median (min-max) of 5 |", "|---|---|"]
    lines += [f"| {r.case} | {r.cell()} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run()))
