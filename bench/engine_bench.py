"""The engine room: does big metadata work, or a segment roll, stall the broker?

On a one-node server, a latency probe (acks=1, one 100-byte message every 5 ms on its
own connection) runs while
- a bulk writer produces 1 MiB acks=1 requests to a topic with `segment.bytes=67108864`
  (it rolls, and fsyncs, a 64 MiB segment every 64 MiB),
- a 2000-partition topic is created (until every partition has taken one message), then
  deleted (until its directories are gone from the disk).
Reported: the probe's p50/p99/max (goal p99 <= 20 ms, max <= 250 ms), how many probes
timed out (5 s), and the time to create (and write) and to delete the 2000 partitions.
The bulk writer is paced (32 MB/s by default: a roll every 2 s); an unpaced one measures
how the probe shares one event loop with a writer saturating it and the disk.

    .venv/bin/python -m bench.engine_bench [bulk MB/s, 0 = unpaced]
"""

from __future__ import annotations

import itertools
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raftka.client.protocol import ApiKey, FrameDecoder, decode_response, encode_request
from raftka.log.record_batch import Record, encode_batch
from raftka.testing.local_cluster import LocalCluster, free_port_base

PARTITIONS = 2000
SEGMENT_BYTES = 64 * 1024 * 1024
PROBE_INTERVAL_S = 0.005
PROBE_TIMEOUT_S = 5.0
BULK_BATCH = 1024  # records of 1 KiB per bulk request (~1 MiB)
BULK_MB_PER_S = 32.0  # a 64 MiB roll every ~2 s; 0 = as fast as the broker takes it
RETRIABLE = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER


@dataclass(frozen=True)
class Row:
    case: str
    value: str
    detail: str = ""


class Wire:
    """A blocking one-socket Kafka client on raftka's sans-IO codec (bench-only)."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder(max_frame_size=1 << 30)
        self._frames: list[bytes] = []
        self._ids = itertools.count(1)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = next(self._ids)
        self.sock.sendall(encode_request(api_key, version, correlation_id, body, client_id="engine-bench"))
        while not self._frames:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self._frames.extend(self._decoder.feed(chunk))
        header, response = decode_response(api_key, version, self._frames.pop(0))
        assert header.correlation_id == correlation_id
        return response

    def produce(self, partitions: dict[tuple[str, int], bytes], acks: int = 1) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[dict]] = {}
        for (topic, index), records in partitions.items():
            by_topic.setdefault(topic, []).append({"index": index, "records": records})
        response = self.request(ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": acks, "timeout_ms": 30_000,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in by_topic.items()]})
        return {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> int:
        response = self.request(ApiKey.CREATE_TOPICS, 4, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 120_000, "validate_only": False})
        return response.topics[0].error_code

    def delete_topic(self, name: str) -> int:
        response = self.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [name], "timeout_ms": 120_000})
        return response.responses[0].error_code

    def close(self) -> None:
        self.sock.close()


def _batch(count: int, size: int) -> bytes:
    return encode_batch([Record(key=None, value=b"v" * size) for _ in range(count)])


def _produce_until_ok(wire: Wire, partitions: dict[tuple[str, int], bytes], deadline: float) -> None:
    """Produce, retrying the partitions answered with a retriable error (not ready yet)."""
    while partitions:
        results = wire.produce(partitions)
        bad = {k: e for k, e in results.items() if e and e not in RETRIABLE}
        if bad:
            raise RuntimeError(f"produce failed: {sorted(bad.items())[:5]}")
        partitions = {k: v for k, v in partitions.items() if results.get(k, 6) != 0}
        if partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(partitions)} partitions still not writable")
            time.sleep(0.05)


class Probe(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.wire = Wire(bootstrap, PROBE_TIMEOUT_S)
        self.latencies: list[float] = []
        self.worst: tuple[float, float] = (0.0, 0.0)  # (latency, when it was sent)
        self.timeouts = 0
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        batch = {("probe", 0): _batch(1, 100)}
        next_at = time.monotonic()
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                if self.wire.produce(batch)[("probe", 0)]:
                    self.errors += 1
                latency = time.monotonic() - start
                self.latencies.append(latency)
                if latency > self.worst[0]:
                    self.worst = (latency, start)
            except (TimeoutError, OSError):
                self.timeouts += 1
                self.wire.close()
                self.wire = Wire(self.bootstrap, PROBE_TIMEOUT_S)
            next_at = max(next_at + PROBE_INTERVAL_S, time.monotonic())
            time.sleep(max(0.0, next_at - time.monotonic()))
        self.wire.close()


class BulkWriter(threading.Thread):
    def __init__(self, bootstrap: str, mb_per_s: float) -> None:
        super().__init__(daemon=True)
        self.wire = Wire(bootstrap, 60)
        self.mb_per_s = mb_per_s
        self.bytes = 0
        self.stop = threading.Event()

    def run(self) -> None:
        batch = {("bulk", 0): _batch(BULK_BATCH, 1000)}
        size = len(batch[("bulk", 0)])
        start = time.monotonic()
        while not self.stop.is_set():
            if self.wire.produce(batch)[("bulk", 0)] == 0:
                self.bytes += size
            if self.mb_per_s > 0:
                ahead = self.bytes / (self.mb_per_s * 1_000_000) - (time.monotonic() - start)
                if ahead > 0:
                    self.stop.wait(ahead)
        self.wire.close()


def _dirs(data: Path, prefix: str) -> int:
    return sum(1 for p in data.iterdir() if p.name.startswith(prefix))


def run(bulk_mb_per_s: float = BULK_MB_PER_S) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        cluster = LocalCluster(tmp, 1, port_base=free_port_base(1), log_level="WARNING")
        try:
            cluster.start()
            cluster.wait_ready(90)
            bootstrap = cluster.bootstrap_servers
            data = cluster.nodes[1].directory / "data"
            admin = Wire(bootstrap, 180)
            assert admin.create_topic("probe", 1) == 0
            assert admin.create_topic("bulk", 1, {"segment.bytes": str(SEGMENT_BYTES)}) == 0
            _produce_until_ok(admin, {("probe", 0): _batch(1, 100), ("bulk", 0): _batch(1, 100)},
                              time.monotonic() + 60)
            probe, bulk = Probe(bootstrap), BulkWriter(bootstrap, bulk_mb_per_s)
            probe.start()
            bulk.start()
            time.sleep(1.0)  # a baseline, with the bulk writer rolling
            phases = [("baseline", time.monotonic())]
            start = time.monotonic()
            phases.append(("create", start))
            error = admin.create_topic("wide", PARTITIONS)
            if error:
                raise RuntimeError(f"creating {PARTITIONS} partitions: error {error}")
            acked = time.monotonic() - start
            phases.append(("first writes", time.monotonic()))
            _produce_until_ok(admin, {("wide", p): _batch(1, 100) for p in range(PARTITIONS)},
                              time.monotonic() + 300)
            created = time.monotonic() - start
            start = time.monotonic()
            phases.append(("delete", start))
            error = admin.delete_topic("wide")
            if error:
                raise RuntimeError(f"deleting: error {error}")
            while _dirs(data, "wide-"):
                if time.monotonic() - start > 300:
                    raise TimeoutError("the deleted topic's directories are still there")
                time.sleep(0.05)
            deleted = time.monotonic() - start
            phases.append(("after", time.monotonic()))
            # Let the bulk writer roll at least once more on its own.
            target = bulk.bytes + SEGMENT_BYTES + (1 << 20)
            until = time.monotonic() + 30
            while bulk.bytes < target and time.monotonic() < until:
                time.sleep(0.1)
            probe.stop.set()
            bulk.stop.set()
            probe.join(30)
            bulk.join(60)
            admin.close()
            rolled = sum(1 for p in (data / "bulk-0").iterdir() if p.suffix == ".log") - 1
        finally:
            cluster.stop()
    lat = sorted(probe.latencies)
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    worst = lat[-1] * 1000
    worst_phase = [name for name, at in phases if at <= probe.worst[1]][-1:] or ["baseline"]
    return [
        Row("probe acks=1 100 B every 5 ms: p50 / p99 / max",
            f"{p50:.1f} / {p99:.1f} / {worst:.0f} ms",
            f"goal p99 <= 20 ms, max <= 250 ms; {len(lat)} answered, {probe.timeouts} timed out (5 s), "
            f"{probe.errors} errors; the max during: {worst_phase[0]}"),
        Row(f"create {PARTITIONS} partitions (1 node), every one written once", f"{created:.1f} s",
            f"CreateTopics answered after {acked:.1f} s"),
        Row(f"delete {PARTITIONS} partitions, until their directories are gone", f"{deleted:.1f} s"),
        Row("bulk writer meanwhile (acks=1, 1 MiB requests, 64 MiB segments)",
            f"{bulk.bytes / 1_000_000:.0f} MB",
            f"{rolled} segments rolled; paced at {bulk_mb_per_s:g} MB/s" if bulk_mb_per_s > 0
            else f"{rolled} segments rolled; unpaced"),
    ]


def format_table(rows: list[Row]) -> str:
    lines = ["| case | value | detail |", "|---|---|---|"]
    lines += [f"| {r.case} | {r.value} | {r.detail} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run(float(sys.argv[1]) if len(sys.argv) > 1 else BULK_MB_PER_S)), file=sys.stdout)
