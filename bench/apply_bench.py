"""Metadata `apply` benchmark: one committed Raft entry (a RecordBatch) of N records.

Run: .venv/bin/python bench/apply_bench.py [--records 10000]

Cases, each on an image with 3 registered brokers (and, for the second, the topic):
- a new topic: one Topic record and N-1 Partition records (CreateTopics at the cap);
- N PartitionChange records on that topic (a broker fenced: every ISR shrinks);
- N/2 new one-partition topics (auto-creation from one Metadata request at the cap).
A batch applies in time linear in N; the old per-record copy of the topic's partition
map (and of the topic map) made the first two quadratic.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raftka.raft_meta.metadata.apply import apply_entry, replay  # noqa: E402
from raftka.raft_meta.metadata.records import (  # noqa: E402
    Partition,
    PartitionChange,
    RecordBatch,
    RegisterBroker,
    Topic,
    UnfenceBroker,
    encode_record,
)

L = (("PLAINTEXT", "127.0.0.1", 9092),)


def _base():
    records = [RegisterBroker(b, f"inc{b}", L, None) for b in (1, 2, 3)]
    records += [UnfenceBroker(b, b) for b in (1, 2, 3)]
    return replay(list(enumerate(records, start=1)))


def _timed(image, records) -> tuple[float, object]:
    batch = RecordBatch(tuple(encode_record(r) for r in records))
    start = time.perf_counter()
    new_image, deltas = apply_entry(image, batch, image.offset + 1)
    elapsed = time.perf_counter() - start
    assert all(d.accepted for d in deltas), [d.reason for d in deltas if not d.accepted][:3]
    return elapsed, new_image


def run(n: int) -> list[tuple[str, float]]:
    base = _base()
    topic_id = "00000000-0000-0000-0000-000000000001"
    create = [Topic("big", topic_id)] + [Partition(topic_id, p, (1, 2, 3), (1, 2, 3), 1 + p % 3)
                                         for p in range(n - 1)]
    create_s, with_topic = _timed(base, create)
    changes = [PartitionChange(topic_id, p, 0, isr=(1, 2) if p % 3 != 2 else (3, 1))
               for p in range(n - 1)]
    change_s, _ = _timed(with_topic, changes)
    topics = []
    for i in range(n // 2):
        tid = f"00000000-0000-0000-0001-{i:012d}"
        topics += [Topic(f"auto-{i}", tid), Partition(tid, 0, (1,), (1,), 1)]
    topics_s, _ = _timed(base, topics)
    return [
        (f"Topic + {n - 1} Partition records", create_s),
        (f"{n - 1} PartitionChange records on one topic", change_s),
        (f"{n // 2} one-partition topics ({n} records)", topics_s),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    for case, seconds in run(args.records):
        print(f"{case:48s} {seconds * 1000:10.1f} ms  ({seconds / args.records * 1e6:.1f} us/record)")


if __name__ == "__main__":
    main()
