"""Metadata size and restart time after many topics are created and deleted (issue 14, item 4).

One real node (`raftka server start`, via LocalCluster). The SDK's blocking Admin creates a
topic (`--partitions`, default 1) and deletes it, `--cycles` times (default 1000), one request
each. Then the node stops, and the bench reports the files in
`<metadata.log.dir>/__cluster_metadata-0/` and their total size, and restarts the node
`--restarts` times (default 3): the time from launching the process to its ready line
("raftka node ready", printed once its image includes its registration and it is unfenced).

Run:  .venv/bin/python bench/metadata_bench.py [--cycles 1000] [--partitions 1]
          [--snapshot-bytes N]   # metadata.log.max.record.bytes.between.snapshots (default: Kafka's)

`--direct ENTRIES` measures the quorum alone, with far more churn than a broker's admin
requests can make in a bench: a 1-voter quorum in this process commits ENTRIES entries, each
a RecordBatch that creates and deletes `--per-entry` (default 50) one-partition topics. Then
it reports the metadata dir and the time to reopen the quorum and have a MetadataLoader's
image at the last offset (no broker, no process launch).

`--codec PARTITIONS` times `encode_snapshot` / `decode_snapshot` of an image with 1000 topics
holding PARTITIONS partitions in all (3 replicas each).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio  # noqa: E402

from raftka.client.admin import NewTopic  # noqa: E402
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader  # noqa: E402
from raftka.raft_meta.metadata.records import (  # noqa: E402
    ControllerClaim,
    Partition,
    RecordBatch,
    RemoveTopic,
    Topic,
    encode_record,
)
from raftka.raft_meta.quorum.quorum import QuorumSettings, open_quorum  # noqa: E402
from raftka.testing.local_cluster import LocalCluster, free_low_port  # noqa: E402

METADATA_SUBDIR = "__cluster_metadata-0"


def _files(directory: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in sorted(directory.iterdir()) if f.is_file()}


def run(cycles: int = 1000, partitions: int = 1, snapshot_bytes: int | None = None,
        restarts: int = 3) -> dict:
    extra = {} if snapshot_bytes is None else {"metadata.log.max.record.bytes.between.snapshots": str(snapshot_bytes)}
    with tempfile.TemporaryDirectory(prefix="raftka-metadata-") as tmp:
        cluster = LocalCluster(Path(tmp), 1, log_level="WARNING", extra_config=extra)
        cluster.prepare()
        try:
            cluster.start_node(1, wait=True)
            started = time.perf_counter()
            with cluster.admin() as admin:
                for i in range(cycles):
                    admin.create_topics([NewTopic(f"churn-{i}", partitions, 1, {})])
                    admin.delete_topics([f"churn-{i}"])
            churn_s = time.perf_counter() - started
            cluster.stop_node(1)
            metadata_dir = next(Path(tmp).rglob(METADATA_SUBDIR))
            files = _files(metadata_dir)
            ready = []
            for _ in range(restarts):
                launched = time.perf_counter()
                cluster.start_node(1, wait=True)
                ready.append(time.perf_counter() - launched)
                cluster.stop_node(1)
            return {"cycles": cycles, "partitions": partitions, "snapshot_bytes": snapshot_bytes,
                    "churn_s": churn_s, "files": files, "total": sum(files.values()), "ready_s": ready}
        finally:
            cluster.stop()


CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"
SECRET = "metadata-bench-secret-0123456789"


def _settings(snapshot_bytes: int | None) -> QuorumSettings:
    if snapshot_bytes is None:
        return QuorumSettings()
    return QuorumSettings(snapshot_max_record_bytes=snapshot_bytes)


async def _direct(directory: Path, entries: int, per_entry: int, snapshot_bytes: int | None) -> dict:
    voters = {1: f"127.0.0.1:{free_low_port(set())}"}
    settings = _settings(snapshot_bytes)
    started = time.perf_counter()
    async with open_quorum(1, voters, SECRET, directory, settings=settings) as quorum:
        with trio.fail_after(30):
            while not quorum.is_leader:
                await quorum.wait_state_change()
        await quorum.submit(ControllerClaim(1, quorum.term, CLUSTER))
        for e in range(entries):
            records = []
            for j in range(per_entry):
                topic_id = f"00000000-0000-0000-{e:04x}-{j:012x}"
                records += [encode_record(Topic(f"churn-{e}-{j}", topic_id)),
                            encode_record(Partition(topic_id, 0, (1,), (1,), 1)),
                            encode_record(RemoveTopic(topic_id))]
            await quorum.submit(RecordBatch(tuple(records)), timeout=30)
        last = quorum.last_offset
    churn_s = time.perf_counter() - started
    files = _files(directory / "__cluster_metadata-0")
    ready = []
    for _ in range(3):
        opened = time.perf_counter()
        async with open_quorum(1, voters, SECRET, directory, settings=settings) as quorum, \
                trio.open_nursery() as nursery:
            loader = MetadataLoader(quorum, CLUSTER)
            await nursery.start(loader.run)
            with trio.fail_after(120):
                await loader.wait_for_offset(last)
            ready.append(time.perf_counter() - opened)
            nursery.cancel_scope.cancel()
    return {"cycles": entries * per_entry, "partitions": 1, "snapshot_bytes": snapshot_bytes, "churn_s": churn_s,
            "files": files, "total": sum(files.values()), "ready_s": ready}


def run_direct(entries: int, per_entry: int = 50, snapshot_bytes: int | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="raftka-metadata-direct-") as tmp:
        return trio.run(_direct, Path(tmp), entries, per_entry, snapshot_bytes)


def run_codec(partitions: int) -> str:
    from raftka.raft_meta.metadata.apply import apply_entry, replay
    from raftka.raft_meta.metadata.records import RegisterBroker
    from raftka.raft_meta.metadata.snapshot import decode_snapshot, encode_snapshot

    listeners = (("PLAINTEXT", "127.0.0.1", 9092),)
    image = replay(list(enumerate([RegisterBroker(b, f"inc-{b}", listeners, None) for b in (1, 2, 3)], 1)))
    per_topic = max(1, partitions // 1000)
    for t in range(1000):
        topic_id = f"00000000-0000-0000-0000-{t:012d}"
        records = [encode_record(Topic(f"topic-{t}", topic_id))]
        records += [encode_record(Partition(topic_id, p, (1, 2, 3), (1, 2, 3), 1)) for p in range(per_topic)]
        image, _ = apply_entry(image, RecordBatch(tuple(records)), 10 + t)
    started = time.perf_counter()
    raw = encode_snapshot(image)
    encoded = time.perf_counter()
    assert decode_snapshot(raw) == image
    decoded = time.perf_counter()
    return (f"{1000 * per_topic} partitions: snapshot {len(raw) / 1e6:.2f} MB, encode {encoded - started:.3f} s, "
            f"decode {decoded - encoded:.3f} s")


def format_row(r: dict) -> str:
    files = ", ".join(f"{name} {size / 1e6:.2f}" for name, size in r["files"].items())
    ready = r["ready_s"]
    snap = "default (20971520)" if r["snapshot_bytes"] is None else str(r["snapshot_bytes"])
    return (f"| {r['cycles']} x {r['partitions']}-partition topic | {snap} | {r['total'] / 1e6:.2f} MB ({files}) | "
            f"{statistics.median(ready) * 1000:.0f} ms ({min(ready) * 1000:.0f}-{max(ready) * 1000:.0f}) | "
            f"{r['churn_s']:.1f} s |")


HEADER = ("| churn | snapshot bytes | metadata dir after (MB) | restart: launch to ready, median (min-max) | "
          "create+delete time |\n|---|---|---|---|---|")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--snapshot-bytes", type=int, default=None)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--direct", type=int, default=None, metavar="ENTRIES")
    parser.add_argument("--per-entry", type=int, default=50)
    parser.add_argument("--codec", type=int, default=None, metavar="PARTITIONS")
    args = parser.parse_args()
    if args.codec is not None:
        print(run_codec(args.codec))
        sys.exit(0)
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(HEADER)
    if args.direct is not None:
        print(format_row(run_direct(args.direct, args.per_entry, args.snapshot_bytes)))
    else:
        print(format_row(run(args.cycles, args.partitions, args.snapshot_bytes, args.restarts)))
