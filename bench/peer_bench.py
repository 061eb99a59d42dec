"""raftka beside a peer: NATS JetStream, both driven by their Python clients.

NATS: Debian's `nats-server` (installed with apt-get when missing), three
nodes clustered on loopback, one file-backed stream with 3 replicas; messages
published with nats-py's `publish_async` (pipelined: up to 4000 awaiting
their PubAck), then `publish_async_completed`.

raftka: three brokers (LocalCluster), a topic with one partition, RF=3,
min.insync.replicas=2, acks=all, driven by the SDK's AsyncProducer (the
`raftka perf produce` loop: 1 MiB batches, linger 5 ms).

Both send the same number of 1 KiB messages; the ratio is raftka msgs/s over
JetStream msgs/s. Every server is started and stopped here.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RECORD = 1024
MB = 1_000_000


@dataclass(frozen=True)
class Row:
    case: str
    value: str
    detail: str = ""


def ensure_nats_server() -> str:
    """The nats-server binary, installed from Debian's archive when missing."""
    found = shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None)
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "nats-server"], check=True, env=env,
                   capture_output=True)
    found = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not os.path.exists(found):
        raise RuntimeError("apt-get installed nats-server but the binary is not on PATH")
    return found


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class NatsCluster:
    """Three nats-server processes with JetStream, clustered on loopback."""

    def __init__(self, directory: Path, nodes: int = 3) -> None:
        self.directory = directory
        self.nodes = nodes
        ports = _free_ports(2 * nodes)
        self.client_ports, self.route_ports = ports[:nodes], ports[nodes:]
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    def start(self, binary: str) -> None:
        routes = ", ".join(f"nats://127.0.0.1:{p}" for p in self.route_ports)
        for i in range(self.nodes):
            store = self.directory / f"n{i + 1}"
            store.mkdir(parents=True, exist_ok=True)
            conf = self.directory / f"n{i + 1}.conf"
            conf.write_text(
                f"server_name: n{i + 1}\n"
                f"listen: 127.0.0.1:{self.client_ports[i]}\n"
                f"jetstream {{ store_dir: \"{store}\", max_memory_store: 256MB, "
                f"max_file_store: 8GB }}\n"
                f"cluster {{ name: bench, listen: 127.0.0.1:{self.route_ports[i]}, "
                f"routes: [{routes}] }}\n")
            with open(self.directory / f"n{i + 1}.log", "wb") as log:
                self.procs.append(subprocess.Popen([binary, "-c", str(conf)], stdout=log,
                                                   stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _nats_publish(urls: list[str], count: int, timeout: float = 60.0) -> float:
    import nats
    from nats.js.api import StorageType, StreamConfig

    deadline = time.monotonic() + timeout
    while True:  # the servers and the JetStream meta leader need a moment
        try:
            nc = await nats.connect(servers=urls, connect_timeout=2, max_reconnect_attempts=0)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    try:
        js = nc.jetstream(timeout=10, publish_async_max_pending=4000)
        config = StreamConfig(name="BENCH", subjects=["bench"], num_replicas=3,
                              storage=StorageType.FILE)
        while True:
            try:
                await js.add_stream(config)
                await js.publish("bench", b"warm-up")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        payload = os.urandom(RECORD)
        futures = []
        start = time.perf_counter()
        for _ in range(count):
            futures.append(await js.publish_async("bench", payload))
        await js.publish_async_completed()
        elapsed = time.perf_counter() - start
        failed = sum(1 for f in futures if f.exception() is not None)
        if failed:
            raise RuntimeError(f"{failed} of {count} JetStream publishes failed: "
                               f"{next(f.exception() for f in futures if f.exception())}")
        info = await js.stream_info("BENCH")
        if info.state.messages < count + 1:
            raise RuntimeError(f"the stream holds {info.state.messages} messages, "
                               f"expected {count + 1}")
        return elapsed
    finally:
        await nc.close()


def jetstream_publish(count: int) -> float:
    binary = ensure_nats_server()
    with tempfile.TemporaryDirectory(prefix="raftka-bench-nats-") as tmp:
        cluster = NatsCluster(Path(tmp))
        try:
            cluster.start(binary)
            return asyncio.run(_nats_publish(cluster.urls, count))
        finally:
            cluster.stop()


def raftka_sdk_publish(count: int) -> float:
    import trio

    from bench.cluster_bench import _cluster, _create
    from raftka.testing.perf import ProducePerfConfig, produce_perf

    with tempfile.TemporaryDirectory(prefix="raftka-bench-peer-") as tmp:
        cluster = _cluster(tmp, 3)
        try:
            _create(cluster, "peer", 1, 3, min_isr=2)
            config = ProducePerfConfig(cluster.bootstrap_servers, "peer", count, RECORD,
                                       acks="all", batch_size=1 << 20, linger_ms=5)
            result, _ = trio.run(produce_perf, config)
            if result.errors:
                raise RuntimeError(f"{result.errors} raftka sends failed: {result.first_error}")
            return result.elapsed_s
        finally:
            cluster.stop()


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f} msgs/s, {count * RECORD / MB / seconds:.1f} MB/s"


def run(count: int = 100_000) -> list[Row]:
    nats_s = jetstream_publish(count)
    raftka_s = raftka_sdk_publish(count)
    return [
        Row("NATS JetStream, 3 nodes, R3 file stream, nats-py publish_async",
            _rate(count, nats_s), f"{count:,} x 1 KiB, up to 4000 awaiting acks"),
        Row("raftka, 3 brokers RF=3 acks=all, SDK AsyncProducer", _rate(count, raftka_s),
            f"{count:,} x 1 KiB, 1 MiB batches, linger 5 ms"),
        Row("ratio raftka / JetStream (msgs/s)", f"{nats_s / raftka_s:.2f}x", "goal >= 3x"),
    ]


def format_table(rows: list[Row]) -> str:
    lines = ["| case | result | detail |", "|---|---|---|"]
    lines += [f"| {r.case} | {r.value} | {r.detail} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run()))
