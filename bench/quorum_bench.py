"""Metadata-quorum benchmark: commit latency and kill -9 failover time, 3 real voter processes.

Run: .venv/bin/python bench/quorum_bench.py [--records 500] [--kills 7] [--no-fsync]

- metadata operations per second: `--records` records from 16 submitters at once at the leader;
- topic-creation latency: a Topic and 6 Partition records in one RecordBatch, one at a time;
- --no-fsync runs the voters with metadata.log.fsync.enable=false (journal never synced);

- commit latency: one record at a time (submit -> committed and applied on
  the submitting voter), submitted at the leader and through a follower;
- failover: time from kill -9 of the leader (the active controller) to the
  moment another voter's ControllerClaim is applied while it leads, i.e. a
  new *active controller* (CLOCK_MONOTONIC is shared by processes on Linux).
  The killed voter is restarted and caught up before the next round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.quorum_procs import Voter, make_voters  # noqa: E402


def _current_active(voters: list[Voter], above: int, timeout: float = 20.0) -> tuple[Voter, int, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for voter in voters:
            for event in voter.drain():
                if event["event"] == "active" and event["epoch"] > above:
                    return voter, event["epoch"], event["t"]
        time.sleep(0.01)
    raise RuntimeError(f"no new active controller within {timeout} s")


def _latencies(voter: Voter, prefix: str, count: int, command: str = "submit", extra: str = "") -> list[float]:
    voter.send(f"{command} {prefix} {count} {extra}".strip())
    acks = voter.wait_for(
        lambda events: (a := [e for e in events if e["event"] == "ack" and e["key"].startswith(prefix + "-")])
        and len(a) == count and a,
        120,
        f"{count} acks",
    )
    return [a["latency"] * 1000 for a in acks]


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms, n={len(ordered)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--kills", type=int, default=7)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        voters = make_voters(3, Path(tmp), extra_args=("--no-fsync",) if args.no_fsync else ())
        print(f"journal fsync before acknowledging: {'off' if args.no_fsync else 'on (metadata.log.fsync.enable)'}")
        try:
            for voter in voters:
                voter.start()
            leader, epoch, _ = _current_active(voters, -1)
            follower = next(v for v in voters if v is not leader)
            print(f"commit latency at the leader:    {_summary(_latencies(leader, 'lead', args.records))}")
            print(f"commit latency via a follower:   {_summary(_latencies(follower, 'foll', args.records))}")
            print(f"topic creation (1+6 records):    {_summary(_latencies(leader, 'topic', args.records // 5, 'topics'))}")
            started = time.monotonic()
            _latencies(leader, "par", args.records, "parallel", "16")
            elapsed = time.monotonic() - started
            print(f"metadata operations per second:  {args.records / elapsed:.0f} "
                  f"({args.records} records, 16 submitters at the leader, {elapsed:.2f} s)")

            failovers = []
            for round_ in range(args.kills):
                killed_at = time.monotonic()
                leader.kill()
                survivors = [v for v in voters if v is not leader]
                new_leader, epoch, active_at = _current_active(survivors, epoch)
                failovers.append(active_at - killed_at)
                leader.start()  # restart and let it catch up before the next kill
                marker = f"r{round_}"
                new_leader.send(f"submit {marker} 1")
                leader.wait_for(
                    lambda events, m=marker: any(e["event"] == "committed" and e["key"] == f"{m}-0" for e in events),
                    30,
                    "restarted voter caught up",
                )
                leader = new_leader
            if failovers:
                print(
                    "kill -9 of the leader -> new active controller: "
                    f"median {statistics.median(failovers):.3f} s, min {min(failovers):.3f} s, "
                    f"max {max(failovers):.3f} s, n={len(failovers)}: {[round(f, 3) for f in failovers]}"
                )
        finally:
            for voter in voters:
                voter.stop()


if __name__ == "__main__":
    main()
