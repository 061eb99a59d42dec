"""The share-partition core alone (broker/group/share_partition_state.py): records acquired and accepted
per second by three members taking turns, with Kafka's defaults (2000 record locks).

Run: .venv/bin/python bench/share_partition_bench.py [--seconds 5] [--batch 500]

Each turn a member acquires up to --batch records from the next fetch offset and accepts them
in one acknowledgement batch per acquired range. No log, network or clock: this bounds what
the core costs per record, not what a share group delivers (that is for `make bench`, once
share groups are served).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raftka.broker.group.share_partition_state import (  # noqa: E402
    AcknowledgementBatch,
    AcknowledgeType,
    SharePartitionState,
)


def run(seconds: float, batch: int) -> tuple[int, float]:
    state = SharePartitionState(0)
    records, now, started = 0, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for member in ("m1", "m2", "m3"):
            first = state.next_fetch_offset()
            for a in state.acquire(member, first, first + batch - 1, now, batch):
                acks = [AcknowledgementBatch(a.first_offset, a.last_offset, (AcknowledgeType.ACCEPT,))]
                state.acknowledge(member, acks, now)
                records += a.last_offset - a.first_offset + 1
        now += 1
    return records, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    records, elapsed = run(args.seconds, args.batch)
    print(f"{records} records acquired and accepted in {elapsed:.1f} s: {records / elapsed:,.0f} records/s "
          f"(3 members, up to {args.batch} per fetch)")


if __name__ == "__main__":
    main()
