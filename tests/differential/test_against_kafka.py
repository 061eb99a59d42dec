"""Kafka 4.4's CLI tools and client libraries, step by step, against Kafka 4.4 and raftka.

Each scenario runs its steps on both clusters and fails on a difference not listed in
known_differences.toml, and on a listed one that has gone away.
"""

from __future__ import annotations

import pytest

from tests.differential.conftest import RESULTS
from tests.differential.runner import Target, load_known, problems, run_steps
from tests.differential.scenarios import SCENARIOS
from tests.differential.steps import Scenario

pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("scenario", [
    pytest.param(s, id=s.name, marks=() if s.bounded else pytest.mark.compat_full) for s in SCENARIOS])
def test_the_same_steps_as_on_kafka(scenario: Scenario, jars, targets: tuple[Target, Target],
                                    tmp_path) -> None:
    kafka, raftka = targets
    results = run_steps(jars, scenario.steps, kafka, raftka, tmp_path)
    RESULTS.extend(results)
    found = problems(results, load_known())
    assert not found, f"{len(found)} step(s) of {scenario.name!r}:\n" + "\n".join(found)
