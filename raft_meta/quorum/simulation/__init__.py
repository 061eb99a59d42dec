"""A deterministic simulation of the metadata quorum (docs/architecture.md, "Quorum simulation").

`run_seed(seed)` runs one seed (raises `SimulationFailure` naming it); `campaign(n, first)`
runs many; `python -m raftka.raft_meta.quorum.simulation` is `make simulate`.
"""

from raftka.raft_meta.quorum.simulation.runner import (
    SeedResult,
    Simulation,
    SimulationFailure,
    campaign,
    run_seed,
)

__all__ = ["SeedResult", "Simulation", "SimulationFailure", "campaign", "run_seed"]
