"""The client side of `raftka perf produce` / `raftka perf consume`.

Modelled on Kafka's kafka-producer-perf-test and kafka-consumer-perf-test:
the producer sends `num_records` records of `record_size` bytes (optionally
throttled to `throughput` records/s), timing each from `send` to its
acknowledgement; every `report_interval_s` it reports a window (records/s,
MB/s, average and maximum latency) and at the end the totals with latency
percentiles. The consumer reads a topic from the beginning and reports the
same rates.

The arithmetic (percentiles, windows, throttling, merging the results of
several producer processes) is pure and takes the clock as an argument; only
`produce_perf` and `consume_perf` do I/O. MB means 2**20 bytes, as in
Kafka's tools.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import trio

MB = 1024 * 1024
# Kafka's producer perf test keeps at most this many latency samples.
MAX_LATENCY_SAMPLES = 500_000
PERCENTILES = (0.5, 0.95, 0.99, 0.999)


# --- pure arithmetic ---------------------------------------------------------
def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values (0.0 when empty):
    the smallest value with at least `fraction` of all values at or below it."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Produce-to-acknowledgement latency in milliseconds."""

    count: int
    avg_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float


def summarize_latencies(latencies_ms: Sequence[float]) -> LatencySummary:
    values = sorted(latencies_ms)
    if not values:
        return LatencySummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p50, p95, p99, p999 = (percentile(values, p) for p in PERCENTILES)
    return LatencySummary(len(values), sum(values) / len(values), p50, p95, p99, p999, values[-1])


def rates(records: int, nbytes: int, seconds: float) -> tuple[float, float]:
    """(records/s, MB/s); zero for an empty interval rather than a division error."""
    if seconds <= 0:
        return 0.0, 0.0
    return records / seconds, nbytes / MB / seconds


class _Rates:
    """records/s and MB/s of a report with `records`, `bytes` and `elapsed_s`."""

    __slots__ = ()

    @property
    def records_per_s(self) -> float:
        return rates(self.records, self.bytes, self.elapsed_s)[0]

    @property
    def mb_per_s(self) -> float:
        return rates(self.records, self.bytes, self.elapsed_s)[1]


@dataclass(frozen=True, slots=True)
class ProduceWindow(_Rates):
    """One periodic report: what was acknowledged during `elapsed_s`."""

    records: int
    bytes: int
    elapsed_s: float
    avg_latency_ms: float
    max_latency_ms: float

    def to_json(self) -> dict[str, Any]:
        return {"type": "window", "records": self.records, "bytes": self.bytes,
                "elapsed_s": self.elapsed_s, "records_per_s": self.records_per_s,
                "mb_per_s": self.mb_per_s, "avg_latency_ms": self.avg_latency_ms,
                "max_latency_ms": self.max_latency_ms}


@dataclass(frozen=True, slots=True)
class ProduceResult(_Rates):
    """The final report. `latency` summarizes the kept samples (all of them
    up to MAX_LATENCY_SAMPLES records); `errors` counts failed deliveries."""

    records: int
    bytes: int
    elapsed_s: float
    errors: int
    latency: LatencySummary
    first_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "result", "records": self.records, "bytes": self.bytes,
                "elapsed_s": self.elapsed_s, "records_per_s": self.records_per_s,
                "mb_per_s": self.mb_per_s, "errors": self.errors,
                "first_error": self.first_error, "latency_ms": asdict(self.latency)}


class ProduceStats:
    """Collects acknowledgements: the running window and the final totals.

    `record` returns a ProduceWindow when the reporting interval has passed
    (then a new window starts), else None. Latencies are sampled like Kafka's
    tool: every `sample_every`-th acknowledgement is kept."""

    def __init__(self, num_records: int, report_interval_s: float, start: float) -> None:
        if report_interval_s <= 0:
            raise ValueError(f"report_interval_s must be > 0, got {report_interval_s}")
        self.sample_every = max(1, num_records // MAX_LATENCY_SAMPLES)
        self.report_interval_s = report_interval_s
        self.start = start
        self.samples: list[float] = []
        self.records = 0
        self.bytes = 0
        self.errors = 0
        self.first_error: str | None = None
        self._window_start = start
        self._window_records = 0
        self._window_bytes = 0
        self._window_latency_sum = 0.0
        self._window_max = 0.0

    def record(self, latency_ms: float, nbytes: int, now: float) -> ProduceWindow | None:
        if self.records % self.sample_every == 0:
            self.samples.append(latency_ms)
        self.records += 1
        self.bytes += nbytes
        self._window_records += 1
        self._window_bytes += nbytes
        self._window_latency_sum += latency_ms
        if latency_ms > self._window_max:
            self._window_max = latency_ms
        if now - self._window_start >= self.report_interval_s:
            return self.close_window(now)
        return None

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"

    def close_window(self, now: float) -> ProduceWindow:
        n = self._window_records
        window = ProduceWindow(n, self._window_bytes, now - self._window_start,
                               self._window_latency_sum / n if n else 0.0, self._window_max)
        self._window_start = now
        self._window_records = self._window_bytes = 0
        self._window_latency_sum = self._window_max = 0.0
        return window

    def result(self, now: float) -> ProduceResult:
        return ProduceResult(self.records, self.bytes, now - self.start, self.errors,
                             summarize_latencies(self.samples), self.first_error)


def merge_results(results: Sequence[ProduceResult], samples: Sequence[Sequence[float]]
                  ) -> ProduceResult:
    """Combine the results of producers that ran side by side (`samples[i]`
    are producer i's kept latencies): counts add up, the elapsed time is the
    longest one, percentiles come from all samples together."""
    if not results:
        raise ValueError("merge_results needs at least one result, got none")
    merged: list[float] = [x for s in samples for x in s]
    first_error = next((r.first_error for r in results if r.first_error), None)
    return ProduceResult(sum(r.records for r in results), sum(r.bytes for r in results),
                         max(r.elapsed_s for r in results), sum(r.errors for r in results),
                         summarize_latencies(merged), first_error)


def merge_windows(windows: Sequence[ProduceWindow]) -> ProduceWindow:
    """Windows of parallel producers reported at about the same time: the
    rates add up, so the merged window spans the mean elapsed time."""
    if not windows:
        raise ValueError("merge_windows needs at least one window, got none")
    records = sum(w.records for w in windows)
    latency_sum = sum(w.avg_latency_ms * w.records for w in windows)
    rate = sum(w.records_per_s for w in windows)
    elapsed = records / rate if rate > 0 else max(w.elapsed_s for w in windows)
    return ProduceWindow(records, sum(w.bytes for w in windows), elapsed,
                         latency_sum / records if records else 0.0,
                         max(w.max_latency_ms for w in windows))


class Throttle:
    """Kafka's ThroughputThrottler: keep the send rate at `per_second`
    records/s on average since `start`; -1 (any negative) means unthrottled."""

    def __init__(self, per_second: float, start: float) -> None:
        if per_second == 0:
            raise ValueError("throughput must be > 0 records/s, or -1 for unthrottled, got 0")
        self.per_second = per_second
        self.start = start

    def delay(self, sent: int, now: float) -> float:
        """Seconds to wait before sending record number `sent` (0-based)."""
        if self.per_second < 0:
            return 0.0
        due = self.start + sent / self.per_second
        return max(0.0, due - now)


def format_window(w: ProduceWindow) -> str:
    return (f"{w.records} records sent, {w.records_per_s:.1f} records/sec "
            f"({w.mb_per_s:.2f} MB/sec), {w.avg_latency_ms:.1f} ms avg latency, "
            f"{w.max_latency_ms:.1f} ms max latency.")


def format_result(r: ProduceResult) -> str:
    lat = r.latency
    line = (f"{r.records} records sent, {r.records_per_s:.1f} records/sec "
            f"({r.mb_per_s:.2f} MB/sec), {lat.avg_ms:.2f} ms avg latency, "
            f"{lat.max_ms:.2f} ms max latency, {lat.p50_ms:.2f} ms 50th, "
            f"{lat.p95_ms:.2f} ms 95th, {lat.p99_ms:.2f} ms 99th, {lat.p999_ms:.2f} ms 99.9th.")
    if r.errors:
        line += f" {r.errors} record(s) failed (first: {r.first_error})."
    return line


def payload(record_size: int, seed: int = 0) -> bytes:
    """A record value of `record_size` random upper-case letters, as Kafka's
    tool sends: compressible like text, not like zeros."""
    if record_size < 0:
        raise ValueError(f"record_size must be >= 0 bytes, got {record_size}")
    rng = random.Random(seed)
    return bytes(rng.choices(range(ord("A"), ord("Z") + 1), k=record_size))


# --- producer ----------------------------------------------------------------
@dataclass(frozen=True)
class ProducePerfConfig:
    bootstrap: str
    topic: str
    num_records: int
    record_size: int = 1024
    throughput: float = -1
    acks: str = "1"
    batch_size: int = 16384
    linger_ms: float = 5
    compression: str | None = None
    report_interval_s: float = 5.0
    # Records sent but not yet acknowledged; Kafka bounds them by buffer.memory (32 MiB).
    max_outstanding_bytes: int = 32 * MB
    producer_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_records < 0:
            raise ValueError(f"num_records must be >= 0, got {self.num_records}")


@dataclass
class _Progress:
    """Shared with a display: how far the run is (read-only for the display)."""

    sent: int = 0
    acked: int = 0


async def produce_perf(config: ProducePerfConfig,
                       on_window: Callable[[ProduceWindow], None] = lambda w: None,
                       progress: _Progress | None = None,
                       clock: Callable[[], float] = time.perf_counter,
                       sending: trio.CancelScope | None = None,
                       ) -> tuple[ProduceResult, list[float]]:
    """Run the producer test; returns the result and the kept latency samples
    (needed to merge the results of several processes). Cancelling `sending` ends the
    sends early (Ctrl-C): what was sent is still flushed and counted in the result."""
    from raftka.client.producer import AsyncProducer

    progress = progress if progress is not None else _Progress()
    value = payload(config.record_size)
    nbytes = len(value)
    max_outstanding = max(1, config.max_outstanding_bytes // max(1, nbytes))
    outstanding = 0
    room = trio.Event()
    async with AsyncProducer(config.bootstrap, acks=config.acks, batch_size=config.batch_size,
                             linger_ms=config.linger_ms, compression_type=config.compression,
                             client_id="raftka-perf-producer",
                             **config.producer_config) as producer:
        await producer.partitions_for(config.topic)
        start = clock()
        stats = ProduceStats(config.num_records, config.report_interval_s, start)
        throttle = Throttle(config.throughput, start) if config.throughput >= 0 else None

        def acked(sent_at: float, _meta: Any, exc: BaseException | None) -> None:
            nonlocal outstanding
            outstanding -= 1
            progress.acked += 1
            now = clock()
            if exc is not None:
                stats.error(exc)
            else:
                window = stats.record((now - sent_at) * 1000, nbytes, now)
                if window is not None:
                    on_window(window)
            if outstanding < max_outstanding:
                room.set()

        send = producer.send_nowait
        topic = config.topic
        with sending if sending is not None else trio.CancelScope():
            for i in range(config.num_records):
                if throttle is not None:
                    wait = throttle.delay(i, clock())
                    if wait > 0:
                        await trio.sleep(wait)
                while outstanding >= max_outstanding:
                    room = trio.Event()
                    await room.wait()
                sent_at = clock()
                send(topic, value).add_callback(
                    lambda meta, exc, t=sent_at: acked(t, meta, exc))
                outstanding += 1
                progress.sent += 1
                if i & 255 == 255:
                    await trio.sleep(0)  # let the sender task drain what is ready
        await producer.flush()
        end = clock()
    return stats.result(end), stats.samples


# --- consumer ----------------------------------------------------------------
@dataclass(frozen=True)
class ConsumePerfConfig:
    bootstrap: str
    topic: str
    num_records: int
    timeout_ms: float = 10000  # stop when nothing arrives for this long
    fetch_max_bytes: int = 50 * MB
    max_partition_fetch_bytes: int = 1 * MB
    report_interval_s: float = 5.0
    security: Any = None  # client/security.py ClientSecurity


@dataclass(frozen=True, slots=True)
class ConsumeReport(_Rates):
    """Records and bytes (keys + values) consumed in `elapsed_s`."""

    records: int
    bytes: int
    elapsed_s: float
    final: bool

    def to_json(self) -> dict[str, Any]:
        return {"type": "result" if self.final else "window", "records": self.records,
                "bytes": self.bytes, "mb": self.bytes / MB, "elapsed_s": self.elapsed_s,
                "records_per_s": self.records_per_s, "mb_per_s": self.mb_per_s}


def format_consume(r: ConsumeReport) -> str:
    word = "consumed" if r.final else "consumed in the last interval"
    return (f"{r.records} records {word}, {r.bytes / MB:.2f} MB in {r.elapsed_s:.2f} s, "
            f"{r.records_per_s:.1f} records/sec ({r.mb_per_s:.2f} MB/sec).")


async def consume_perf(config: ConsumePerfConfig,
                       on_window: Callable[[ConsumeReport], None] = lambda r: None,
                       progress: _Progress | None = None,
                       clock: Callable[[], float] = time.perf_counter) -> ConsumeReport:
    """Read every partition of the topic from the beginning until `num_records`
    arrived or none arrived for `timeout_ms`; the clock starts at the first
    poll (after metadata and offset lookups, as Kafka's fetch.time)."""
    from raftka.client.admin import AsyncAdmin
    from raftka.client.consumer import AsyncConsumer
    from raftka.client.records import TopicPartition

    progress = progress if progress is not None else _Progress()
    async with AsyncAdmin(config.bootstrap, security=config.security) as admin:
        (description,) = await admin.describe_topics([config.topic])
    partitions = [TopicPartition(config.topic, p.partition) for p in description.partitions]
    async with AsyncConsumer(config.bootstrap, client_id="raftka-perf-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_bytes=config.fetch_max_bytes,
                             max_partition_fetch_bytes=config.max_partition_fetch_bytes,
                             security=config.security) as consumer:
        consumer.assign(partitions)
        start = last_record = window_start = clock()
        records = nbytes = window_records = window_bytes = 0
        while records < config.num_records:
            batches = await consumer.poll(timeout_ms=min(1000.0, config.timeout_ms))
            now = clock()
            got = 0
            for recs in batches.values():
                got += len(recs)
                for r in recs:
                    window_bytes += (len(r.value) if r.value else 0) + (len(r.key) if r.key else 0)
            if got:
                last_record = now
                records += got
                window_records += got
                progress.acked = records
            elif (now - last_record) * 1000 >= config.timeout_ms:
                break
            if now - window_start >= config.report_interval_s:
                nbytes += window_bytes
                on_window(ConsumeReport(window_records, window_bytes, now - window_start, False))
                window_start, window_records, window_bytes = now, 0, 0
        nbytes += window_bytes
        end = last_record if records else clock()
    return ConsumeReport(records, nbytes, end - start, True)
