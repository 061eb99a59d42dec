"""`make simulate SEEDS=N FIRST_SEED=S`: exits 1 at the first failing seed (printed, with how to replay it)."""

from __future__ import annotations

import argparse
import sys

from raftka.raft_meta.quorum.simulation.runner import campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftka.raft_meta.quorum.simulation", description=__doc__)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--chaos-seconds", type=float, default=8.0, help="simulated seconds of faults per seed")
    parser.add_argument("--as-is", action="store_true",
                        help="pysyncobj's own AppendEntries handling (truncates matching entries), to show the bug")
    parser.add_argument("--without", choices=("truncation", "snapshot", "votes"),
                        help="leave out one fix of raft_meta/quorum/pysyncobj_patches.py (--as-is: truncation)")
    parser.add_argument("--no-fsync", action="store_true", help="journal never synced (metadata.log.fsync.enable=false)")
    parser.add_argument("--tcp", action="store_true",
                        help="only what TCP allows: no drops, duplicates or reordering within a connection")
    parser.add_argument("--max-cpu-seconds", dest="max_seconds", type=float, default=None,
                        help="stop starting seeds after this much CPU time")
    parser.add_argument("--keep-going", action="store_true", help="run every seed, report all failures")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (chunks of consecutive seeds; failures reported in seed order)")
    args = parser.parse_args(argv)
    without = args.without or ("truncation" if args.as_is else None)
    failures = campaign(args.seeds, args.first_seed, fix=without is None, without=without or "truncation", fsync=not args.no_fsync,
                        chaos_s=args.chaos_seconds, tcp=args.tcp, max_seconds=args.max_seconds, stop_at_first=not args.keep_going,
                        report=lambda line: print(line, flush=True), jobs=args.jobs)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
