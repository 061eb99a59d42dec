"""Per-seed fingerprints of the quorum simulation: proof that a change (an optimisation of the
simulation or of its checker) leaves every seed's schedule and verdict exactly as they were.

A seed's fingerprint is a JSON object: the verdict (the `SimulationFailure` text, which holds
the simulated time of the failure, or "pass"), the `SeedResult`, the number of events, a
SHA-256 over the key `(time, kind, a, b, n)` of every event the scheduler ran in order (the
schedule itself), the number of messages delivered, a digest of the committed entries the
checker collected, and per voter at the end: alive, term, commit index, last applied, its
log's first and last index and a digest of its entries, and its image digest.

    python -m raftka.raft_meta.quorum.simulation.fingerprint --seeds 300 --extra 9220,1984 --out before.jsonl
    python -m raftka.raft_meta.quorum.simulation.fingerprint --seeds 300 --extra 9220,1984 --compare before.jsonl
    (--without truncation|snapshot|votes, --no-fsync, --tcp: the variants `make simulate` runs)

`--compare` exits 1 and prints the first differing seeds if any fingerprint differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

from raftka.raft_meta.metadata.snapshot import image_digest
from raftka.raft_meta.quorum.simulation.runner import Simulation, SimulationFailure


def _node_state(node) -> dict:
    if node.sync is None:
        return {"alive": False, "durable": len(node.disk.entries)}
    sync = node.sync
    entries = sync._SyncObj__raftLog.entries
    h = hashlib.sha256()
    for command, idx, term in entries:
        h.update(repr((idx, term)).encode())
        h.update(bytes(command))
    return {
        "alive": True,
        "term": sync._getTerm(),
        "leader": sync._isLeader(),
        "commit": sync._SyncObj__raftCommitIndex,
        "last_applied": sync.raftLastApplied,
        "log": [entries[0][1], entries[-1][1]] if entries else None,
        "entries": h.hexdigest()[:16],
        "applied": node.log.last,
        "image": image_digest(node.log.image)[:16],
    }


def fingerprint(seed: int, **options) -> dict:
    trace = hashlib.sha256()
    sim = Simulation(seed, **options)
    sim.scheduler.trace = lambda event: trace.update(repr(event[:5]).encode())
    state: dict = {}
    result = None
    try:
        with sim.running():
            try:
                result = sim._run()
            finally:
                state["nodes"] = {name: _node_state(node) for name, node in sorted(sim.nodes.items())}
                committed = hashlib.sha256()
                for idx in sorted(sim.checker.committed):
                    term, command = sim.checker.committed[idx]
                    committed.update(repr((idx, term)).encode())
                    committed.update(command)
                state["committed"] = [sim.checker.max_committed, committed.hexdigest()[:16]]
                state["acked"] = sim.checker.acked
                state["leaders"] = sorted(sim.checker.leaders.items())
        verdict = "pass"
    except SimulationFailure as exc:
        verdict = str(exc)
    return {
        "seed": seed,
        "verdict": verdict,
        "result": None if result is None else [result.voters, result.sim_seconds, result.events, result.committed,
                                               result.acked, result.crashes, result.elections],
        "events": sim.events,
        "schedule": trace.hexdigest()[:16],
        "delivered": sim.network.delivered,
        "now_us": sim.scheduler.now_us,
        **state,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftka.raft_meta.quorum.simulation.fingerprint", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--extra", default="", help="more seeds, comma-separated")
    parser.add_argument("--without", choices=("truncation", "snapshot", "votes"),
                        help="leave out one fix of raft_meta/quorum/pysyncobj_patches.py (as `make simulate`'s --without)")
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--tcp", action="store_true")
    parser.add_argument("--out", help="write the fingerprints here (JSON lines)")
    parser.add_argument("--compare", help="compare with the fingerprints in this file")
    args = parser.parse_args(argv)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    seeds += [int(s) for s in args.extra.split(",") if s.strip()]
    started = time.process_time()
    options = {"fsync": not args.no_fsync, "tcp": args.tcp}
    if args.without:
        options.update(fix=False, without=args.without)
    prints = [fingerprint(seed, **options) for seed in seeds]
    cpu = time.process_time() - started
    print(f"{len(seeds)} seeds fingerprinted in {cpu:.1f} s CPU", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            for fp in prints:
                f.write(json.dumps(fp, sort_keys=True) + "\n")
    if args.compare:
        with open(args.compare) as f:
            expected = {fp["seed"]: fp for fp in map(json.loads, f)}
        differing = [fp["seed"] for fp in prints
                     if json.loads(json.dumps(fp, sort_keys=True)) != expected.get(fp["seed"])]
        if differing:
            print(f"{len(differing)} of {len(seeds)} fingerprints differ: {differing[:20]}", file=sys.stderr)
            for seed in differing[:3]:
                print("expected", json.dumps(expected.get(seed), sort_keys=True), file=sys.stderr)
                print("got     ", json.dumps(next(fp for fp in prints if fp["seed"] == seed), sort_keys=True),
                      file=sys.stderr)
            return 1
        print(f"all {len(seeds)} fingerprints equal", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
