"""Drive a broker with mutated frames and check it survived: the fuzzer's I/O shell.

`fuzz(...)` sends frames from a `Mutator` over a few concurrent connections. Each
mutated frame is followed by a sentinel ApiVersions request: its answer means the
broker consumed the mutated frame and the connection is still in step (it is reused);
a close means the broker refused the frame (reconnect); silence past `frame_timeout`
means the broker is waiting for bytes or a long poll (close, reconnect).

The checks (`Verdict`): the process is alive, its RSS stayed under a bound, a normal
client (confluent-kafka) produces and consumes afterwards, no error-level line is in
its log, and every batch stored in every topic decodes with an independent decoder
(kafka-python).

`python -m tests.fuzz --frames N --seed S` (what `make fuzz` runs) starts a broker,
fuzzes it, checks it and stops it; see `main`.
"""

from __future__ import annotations

import argparse
import itertools
import random
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from raftka.client.protocol import ApiKey, ErrorCode, FrameDecoder, ProtocolError, encode_request
from tests.fuzz.corpus import FUZZ_TOPICS
from tests.fuzz.mutate import ALL_KINDS, PROTOCOL_KINDS, FuzzFrame, Mutator

SENTINEL_CLIENT = "fuzz-sentinel"
# Broker settings for fuzzing: stalled connections (a lying size prefix, a long poll the
# fuzzer gave up on) are closed by the broker within seconds, not ten minutes.
FUZZ_PROPERTIES = {"connections.max.idle.ms": "5000", "group.initial.rebalance.delay.ms": "0",
                   "offsets.topic.num.partitions": "4", "socket.request.max.bytes": str(8 << 20)}
RSS_GROWTH_LIMIT = 256 << 20
# The fuzzed broker's address-space limit (RLIMIT_AS): a request that makes it allocate without
# bound ends in MemoryError (a finding) instead of taking the machine down with it.
ADDRESS_SPACE_LIMIT = 2 << 30


def limit_memory(pid: int, limit: int = ADDRESS_SPACE_LIMIT) -> None:
    import resource

    resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _sentinel(correlation_id: int) -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 0, correlation_id, {}, client_id=SENTINEL_CLIENT)


@dataclass
class FuzzStats:
    frames: int = 0
    outcomes: Counter = field(default_factory=Counter)  # answered / closed / stalled
    kinds: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0
    rss: list[tuple[int, int]] = field(default_factory=list)  # (frames sent, broker RSS bytes)

    def summary(self) -> str:
        rate = self.frames / self.elapsed_s if self.elapsed_s else 0.0
        rss = (f", RSS {self.rss[0][1] >> 20} -> max {max(r for _, r in self.rss) >> 20} -> "
               f"{self.rss[-1][1] >> 20} MiB") if self.rss else ""
        return (f"{self.frames} frames in {self.elapsed_s:.1f} s ({rate:.0f}/s); "
                f"{dict(self.outcomes)}; kinds {dict(sorted(self.kinds.items()))}{rss}")


async def _exchange(stream: trio.SocketStream, decoder: FrameDecoder, frame: FuzzFrame,
                    sentinel_id: int) -> str:
    await stream.send_all(frame.data + _sentinel(sentinel_id))
    while True:
        data = await stream.receive_some(1 << 16)
        if not data:
            return "closed"
        for response in decoder.feed(data):
            if len(response) >= 4 and struct.unpack_from(">i", response)[0] == sentinel_id:
                return "answered"


async def fuzz(address: tuple[str, int], mutator: Mutator, start: int, count: int, *,
               concurrency: int = 16, frame_timeout: float = 0.5, pid: int | None = None,
               sample_every: int = 1000, progress: Callable[[FuzzStats], None] | None = None) -> FuzzStats:
    """Send frames start..start+count-1 of `mutator`; raise ConnectionError if the broker
    stops accepting connections."""
    stats = FuzzStats()
    indexes = iter(range(start, start + count))
    began = time.perf_counter()
    if pid is not None:
        stats.rss.append((0, rss_bytes(pid)))

    async def worker(number: int) -> None:
        stream: trio.SocketStream | None = None
        decoder = FrameDecoder(max_frame_size=1 << 30)
        sentinels = itertools.count(1_500_000_000 + number, concurrency)  # unique per worker
        for index in indexes:
            frame = mutator.frame(index)
            if stream is None:
                for attempt in range(50):
                    try:
                        stream = await trio.open_tcp_stream(*address)
                        break
                    except OSError as exc:
                        if attempt == 49:
                            raise ConnectionError(f"the broker stopped accepting connections at "
                                                  f"{frame.describe(mutator.seed)}: {exc}") from exc
                        await trio.sleep(0.1)  # pacing reconnects; the verdict tells if it died
                decoder = FrameDecoder(max_frame_size=1 << 30)
            outcome = "stalled"
            with trio.move_on_after(frame_timeout):
                try:
                    outcome = await _exchange(stream, decoder, frame, next(sentinels))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError):
                    outcome = "closed"
            stats.outcomes[outcome] += 1
            stats.kinds[frame.kind] += 1
            stats.frames += 1
            if outcome != "answered":
                await stream.aclose()
                stream = None
            if pid is not None and stats.frames % sample_every == 0:
                stats.rss.append((stats.frames, rss_bytes(pid)))
                if progress is not None:
                    stats.elapsed_s = time.perf_counter() - began
                    progress(stats)
        if stream is not None:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        for number in range(concurrency):
            nursery.start_soon(worker, number)
    stats.elapsed_s = time.perf_counter() - began
    if pid is not None:
        stats.rss.append((stats.frames, rss_bytes(pid)))
    return stats


# -- the verdict -----------------------------------------------------------------------

def error_lines(log_path: Path, from_offset: int = 0) -> list[str]:
    """Error-level lines of a server log (structlog JSON or stdlib), from a byte offset."""
    out = []
    with open(log_path, "rb") as log:
        log.seek(from_offset)
        for raw in log:
            line = raw.decode(errors="replace")
            if '"level": "error"' in line or '"level": "critical"' in line or line.startswith(
                    ("ERROR", "CRITICAL", "Traceback")):
                out.append(line.rstrip())
    return out


def round_trip(bootstrap: str, topic: str, count: int = 20) -> str | None:
    """Produce and consume `count` messages with confluent-kafka; None if all came back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    from tests.compat.wire_client import WireConnection

    # A fuzzed UnregisterBroker may have named the live broker itself (an admin may do that):
    # it re-registers and is unfenced within a few heartbeats, and until then a topic cannot be
    # placed (INVALID_REPLICATION_FACTOR, no unfenced broker). Wait for that, bounded.
    deadline = time.monotonic() + 30
    with WireConnection(bootstrap) as conn:
        code = conn.create_topic(topic)
        while code == ErrorCode.INVALID_REPLICATION_FACTOR and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the broker's registration, with the deadline above
            code = conn.create_topic(topic)
        if code != 0:
            return f"CreateTopics {topic}: error {code}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    sent = [f"round-trip-{i}".encode() for i in range(count)]
    for value in sent:
        producer.produce(topic, value)
    if producer.flush(30):
        return "the producer could not deliver every message within 30 s"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "enable.auto.commit": False, "log_level": 0})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return None if got == sent else f"consumed {len(got)} of {count} messages back: {got[:3]}..."


def malformed_stored(bootstrap: str) -> list[str]:
    """Every batch of every partition of every topic, decoded record by record by kafka-python
    (an independent decoder): what does not decode."""
    from kafka.record.memory_records import MemoryRecords

    from tests.compat.wire_client import EARLIEST, LATEST, WireConnection
    from tests.unit.kafka_python_codecs import pyarrow_backed_kafka_codecs

    problems: list[str] = []
    with WireConnection(bootstrap, timeout=30) as conn, pyarrow_backed_kafka_codecs():
        metadata = conn.request(ApiKey.METADATA, 1, {"topics": None})
        for topic in metadata.topics:
            for part in topic.partitions:
                where = f"{topic.name}-{part.partition_index}"
                # From the log start: retention may have deleted old segments (the fuzzer's
                # timestamps are years old, and some batches claim 2^31 offsets).
                # A fuzzed UnregisterBroker (broker id 1: the live broker) or ElectLeaders moves
                # leaderships for a moment, as in Kafka: wait out the retriable errors.
                start = _listed(conn, topic.name, part.partition_index, EARLIEST)
                offset, end = start.offset, _listed(conn, topic.name, part.partition_index, LATEST).offset
                while offset < end:
                    result = conn.fetch(topic.name, part.partition_index, offset)
                    if result.error_code:
                        problems.append(f"{where}@{offset}: fetch error {result.error_code}")
                        break
                    records = MemoryRecords(bytes(result.records))
                    last = offset
                    try:
                        while (batch := records.next_batch()) is not None:
                            if not batch.validate_crc():
                                raise ValueError("bad CRC")
                            decoded = sum(1 for _ in batch)
                            if decoded != batch.records_count:
                                raise ValueError(f"{decoded} records decoded, header says {batch.records_count}")
                            last = batch.next_offset
                    except Exception as exc:  # noqa: BLE001 - any decoding failure is the finding
                        problems.append(f"{where}@{last}: {type(exc).__name__}: {exc}")
                        break
                    if last == offset:
                        problems.append(f"{where}@{offset}: fetch returned no whole batch below {end}")
                        break
                    offset = last
    return problems


@dataclass
class Verdict:
    alive: bool
    rss_growth: int
    round_trip: str | None
    errors: list[str]
    malformed: list[str] | None  # None: not checked

    def failures(self, rss_limit: int = RSS_GROWTH_LIMIT) -> list[str]:
        out = []
        if not self.alive:
            out.append("the broker process died")
        if self.rss_growth > rss_limit:
            out.append(f"broker RSS grew by {self.rss_growth >> 20} MiB (limit {rss_limit >> 20} MiB)")
        if self.round_trip:
            out.append(f"round trip after fuzzing failed: {self.round_trip}")
        if self.errors:
            out.append(f"{len(self.errors)} error-level log line(s), e.g. {self.errors[:3]}")
        if self.malformed:
            out.append(f"{len(self.malformed)} partition(s) store malformed batches, e.g. {self.malformed[:3]}")
        return out


def verdict(server, stats: FuzzStats, log_offset: int, *, check_stored: bool, round_trip_topic: str) -> Verdict:
    alive = server.running()
    growth = stats.rss[-1][1] - stats.rss[0][1] if len(stats.rss) >= 2 else 0
    trip = round_trip(server.bootstrap, round_trip_topic) if alive else "not tried: the broker is dead"
    errors = error_lines(server.log_path, log_offset)
    malformed = malformed_stored(server.bootstrap) if (alive and check_stored) else None
    return Verdict(alive, growth, trip, errors, malformed)


def prepare_topics(bootstrap: str) -> None:
    from tests.compat.wire_client import WireConnection

    with WireConnection(bootstrap) as conn:
        for name, partitions in FUZZ_TOPICS.items():
            code = conn.create_topic(name, partitions)
            if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
                raise RuntimeError(f"cannot create {name}: error {code}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed (printed)")
    parser.add_argument("--start", type=int, default=0, help="first frame index (replay a range)")
    parser.add_argument("--kinds", choices=("all", "protocol"), default="all",
                        help="protocol: leave out the CRC-valid malformed batches")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-seconds", type=float, default=None, help="stop sending after this long")
    parser.add_argument("--keep", action="store_true", help="keep the broker's directory")
    args = parser.parse_args(argv)
    from raftka.cli.logging_setup import configure_logging
    from tests.compat.server_process import ServerProcess

    configure_logging(level="WARNING")
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    kinds = ALL_KINDS if args.kinds == "all" else PROTOCOL_KINDS
    print(f"fuzz: seed {seed}, frames {args.start}..{args.start + args.frames - 1}, kinds {args.kinds}", flush=True)
    directory = Path(tempfile.mkdtemp(prefix="raftka-fuzz-"))
    server = ServerProcess(directory, properties=FUZZ_PROPERTIES)
    server.start()
    limit_memory(server.pid)
    try:
        prepare_topics(server.bootstrap)
        host, port = server.bootstrap.rsplit(":", 1)
        log_offset = server.log_path.stat().st_size
        mutator = Mutator(seed, kinds)
        stats = FuzzStats()
        began = time.perf_counter()
        chunk = 50_000
        sent = 0
        while sent < args.frames:
            if args.max_seconds is not None and time.perf_counter() - began > args.max_seconds:
                print(f"fuzz: stopping after {args.max_seconds} s", flush=True)
                break
            first, n = args.start + sent, min(chunk, args.frames - sent)
            part = trio.run(lambda first=first, n=n: fuzz(
                (host, int(port)), mutator, first, n, concurrency=args.concurrency, pid=server.pid))
            sent += part.frames
            stats.frames += part.frames
            stats.outcomes.update(part.outcomes)
            stats.kinds.update(part.kinds)
            stats.rss.extend(part.rss if not stats.rss else part.rss[1:])
            stats.elapsed_s = time.perf_counter() - began
            print(f"fuzz: {stats.summary()}", flush=True)
        result = verdict(server, stats, log_offset, check_stored=True, round_trip_topic=f"fuzz-round-trip-{seed}")
        print(f"fuzz: {stats.summary()}")
        print(f"fuzz: stored-data check: {len(result.malformed or [])} partition(s) with malformed batches")
        failures = result.failures()
        for failure in failures:
            print(f"FAIL: {failure}")
        print(f"fuzz: {'FAILED' if failures else 'passed'} (seed {seed}; replay: --seed {seed} "
              f"--start N --frames 1); broker log: {server.log_path}")
        if failures:
            args.keep = True
        return 1 if failures else 0
    finally:
        server.stop()
        if not args.keep:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())


# NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION (re-registering)
RETRIABLE_LIST_OFFSETS = (6, 5, 3)


def _listed(conn, topic: str, partition: int, target: int, timeout: float = 30.0):
    """ListOffsets for one partition, retried while its error is retriable (until `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        result = conn.list_offset(topic, partition, target)
        if result.error_code not in RETRIABLE_LIST_OFFSETS or time.monotonic() >= deadline:
            assert result.error_code == 0, f"ListOffsets {topic}-{partition}: error {result.error_code}"
            return result
        time.sleep(0.1)  # a poll interval between retries, bounded by the deadline above
