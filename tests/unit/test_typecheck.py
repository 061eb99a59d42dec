"""The type checker, run by the suite as test_layering runs the import rules: mypy over the
installed layout (tests/typecheck.py, what `make lint` runs) with pyproject.toml's [tool.mypy].

The strict set (the pure cores and the wire codec) is checked with --strict's flags; the rest at
mypy's default level, less the error codes its baseline still turns off per module. A type error
anywhere fails here; one in the strict set is named as such.
"""

from __future__ import annotations

import re

from tests import typecheck

# The cores the design keeps free of I/O, and the codec every layer imports: they stay strict.
CORES = {
    "raftka.client.protocol.*",
    "raftka.broker.replication.replica_state",
    "raftka.broker.txn.txn_state",
    "raftka.broker.group.group_state",
    "raftka.broker.group.consumer_group_state",
    "raftka.broker.group.share_group_state",
    "raftka.broker.group.share_partition_state",
    "raftka.raft_meta.controller.controller_decisions",
    "raftka.raft_meta.metadata.apply",
    "raftka.log.producer_state",
}
ERROR = re.compile(r"^(?P<path>[\w./-]+\.py):\d+: error: ", re.M)


def test_the_cores_are_in_the_strict_set() -> None:
    missing = CORES - set(typecheck.strict_modules())
    assert not missing, f"pyproject.toml's strict mypy override no longer names {sorted(missing)}"
    for module in CORES:
        assert (typecheck.REPO / typecheck.repo_path(module)).exists(), f"{module}: no such module any more"


def test_the_code_type_checks() -> None:
    """One mypy run (two at once, in two xdist workers, would share its cache and layout)."""
    report, status = typecheck.run()
    strict = tuple(typecheck.repo_path(m) for m in typecheck.strict_modules())
    lines = [line for line in report.splitlines()
             if (m := ERROR.match(line)) and m.group("path").startswith(strict)]
    assert not lines, "type errors in the strict set (`make lint` shows them):\n" + "\n".join(lines)
    assert status == 0, f"mypy (`make lint`):\n{report}"
