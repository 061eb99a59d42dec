"""Broker throughput, latency and failover, with real clients against real processes.

1. one broker, acks=1: produce with confluent-kafka and with the SDK, consume likewise;
2. three brokers, RF=3, acks=all: confluent-kafka produce throughput, produce-to-ack
   latency p50/p99 at a fixed 10 MB/s, failover time (kill -9 of the partition
   leader → first successful acks=all produce), median of 5, and the longest produce
   stall during a rolling restart (clean stops, then kill -9s) of every node.
Every server is started and stopped here; nothing is left running.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass

import confluent_kafka

from raftka.client.admin import NewTopic
from raftka.client.blocking import Admin, Consumer
from raftka.client.errors import TopicAlreadyExistsError
from raftka.client.records import TopicPartition
from raftka.testing.local_cluster import LocalCluster

RECORD = 1024
MB = 1_000_000
# Kafka's defaults. A killed broker is found by the controller's liveness probe
# (its control connection drops, its listener refuses), not by the session timeout
# (see docs/performance.md, "Failover").
SESSION_TIMEOUT_MS = 9000
HEARTBEAT_MS = 2000


@dataclass(frozen=True)
class Row:
    case: str
    value: str
    detail: str = ""


def _free_base(nodes: int) -> int:
    from raftka.testing.local_cluster import free_port_base

    return free_port_base(nodes)


def _cluster(tmp: str, nodes: int) -> LocalCluster:
    cluster = LocalCluster(tmp, nodes, port_base=_free_base(nodes), log_level="WARNING",
                           extra_config={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                         "broker.heartbeat.interval.ms": str(HEARTBEAT_MS)})
    cluster.start()
    cluster.wait_ready(90)
    return cluster


def _create(cluster: LocalCluster, topic: str, partitions: int, rf: int, min_isr: int = 1) -> None:
    with Admin(cluster.bootstrap_servers) as admin:
        try:
            admin.create_topics([NewTopic(topic, partitions, rf, {"min.insync.replicas": str(min_isr)})])
        except TopicAlreadyExistsError:
            pass  # a retry of ours whose first attempt timed out (a 1000-partition topic) and landed
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with Admin(cluster.bootstrap_servers) as admin:
            (desc,) = admin.describe_topics([topic])
        if all(p.leader >= 0 and len(p.isr) == rf for p in desc.partitions):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{topic} has no full ISR")


def _confluent_produce(bootstrap: str, topic: str, count: int, acks: str) -> float:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                                        "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                                        "queue.buffering.max.kbytes": 1 << 21, "log_level": 0})
    value = b"x" * RECORD
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - start


def _sdk_produce(bootstrap: str, topic: str, count: int, acks) -> float:
    """The trio-native AsyncProducer, driven like `raftka perf produce` (the
    blocking facade adds a thread hop per send and measures that instead)."""
    import trio

    from raftka.testing.perf import ProducePerfConfig, produce_perf

    config = ProducePerfConfig(bootstrap, topic, count, RECORD, acks=str(acks),
                               batch_size=1 << 20, linger_ms=5)
    result, _ = trio.run(produce_perf, config)
    if result.errors:
        raise RuntimeError(f"{result.errors} SDK sends failed: {result.first_error}")
    return result.elapsed_s


@dataclass(frozen=True)
class ConsumeRun:
    seconds: float  # from subscribe to the last record, start-up included
    startup: float  # until the first record arrived (metadata, offsets, first fetch)

    @property
    def steady(self) -> float:
        return self.seconds - self.startup


def _confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> ConsumeRun:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                        "enable.auto.commit": False, "fetch.max.bytes": 50 * 1024 * 1024,
                                        "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    first = None
    start = time.perf_counter()
    while got < count:
        batch = consumer.consume(10000, 1.0)
        if batch and first is None:
            first = time.perf_counter()
        got += sum(1 for m in batch if not m.error())
    end = time.perf_counter()
    consumer.close()
    return ConsumeRun(end - start, (first or end) - start)


def _sdk_consume(bootstrap: str, topic: str, partitions: int, count: int) -> ConsumeRun:
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_bytes=50 * 1024 * 1024) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got = 0
        first = None
        start = time.perf_counter()
        while got < count:
            polled = sum(len(v) for v in consumer.poll(timeout_ms=1000, max_records=100000).values())
            if polled and first is None:
                first = time.perf_counter()
            got += polled
        end = time.perf_counter()
        return ConsumeRun(end - start, (first or end) - start)


def _consume_row(case: str, consume, bootstrap: str, topic: str, partitions: int, count: int,
                 runs: int = 3) -> Row:
    """Median of `runs` reads of the whole topic from offset 0, each by a fresh consumer.
    The rate is Kafka consumer-perf-test's fetch.MB.sec: from the first record to the last;
    start-up (metadata, offset lookup, first fetch) is given apart."""
    results = sorted((consume(bootstrap, topic, partitions, count) for _ in range(runs)), key=lambda r: r.steady)
    median = results[len(results) // 2]
    return Row(case, _rate(count, median.steady),
               f"median of {runs} runs: " + ", ".join(f"{count * RECORD / MB / r.steady:.0f}" for r in results)
               + f" MB/s; start-up {median.startup * 1000:.0f} ms; {count * RECORD / MB / median.seconds:.0f} MB/s "
               "with it")


def _rate(count: int, seconds: float) -> str:
    return f"{count * RECORD / MB / seconds:.1f} MB/s, {count / seconds:,.0f} rec/s"


def _latency_at_fixed_rate(bootstrap: str, topic: str, mb_per_s: float = 10.0,
                           seconds: float = 5.0) -> tuple[float, float, float]:
    """(p50, p99 in ms, offered MB/s): produce-to-ack latency of acks=all sends paced at
    `mb_per_s`. Each message's latency runs from its own produce() call to its delivery."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                                        "log_level": 0})
    latencies: list[float] = []
    per_second = int(mb_per_s * MB / RECORD)
    value = b"x" * RECORD
    total = int(per_second * seconds)
    sent = 0
    start = time.perf_counter()
    while sent < total:
        # Send what is due, then wait in poll (serving delivery callbacks) until the next
        # message is due. librdkafka's poll timeout has 1 ms resolution, so shorter waits
        # would spin, and a spinning client took a core from the brokers on this 2-core
        # machine (p99 75-88 ms, then 10-27 ms, measured that way). Messages due within the
        # same millisecond go out together, as they would within linger.ms anyway.
        due = min(total, int((time.perf_counter() - start) * per_second) + 1)
        while sent < due:
            now = time.perf_counter()
            producer.produce(topic, value=value,
                             on_delivery=lambda err, msg, t=now: latencies.append(time.perf_counter() - t))
            sent += 1
        producer.poll(max(0.001, start + sent / per_second - time.perf_counter()))
    offered = total * RECORD / MB / (time.perf_counter() - start)
    producer.flush(60)
    if len(latencies) != total:
        raise RuntimeError(f"{total - len(latencies)} of {total} paced sends were not delivered")
    latencies.sort()
    return latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000, offered


def _failover_times(cluster: LocalCluster, topic: str, rounds: int = 5) -> list[float]:
    times = []
    for _ in range(rounds):
        with Admin(cluster.bootstrap_servers) as admin:
            (desc,) = admin.describe_topics([topic])
        leader = desc.partitions[0].leader
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 200,
                                            "retry.backoff.ms": 20, "retry.backoff.max.ms": 100, "log_level": 0})
        producer.produce(topic, b"warm", partition=0)
        producer.flush(30)
        cluster.kill(leader)
        killed = time.perf_counter()
        done: list[float] = []
        producer.produce(topic, b"after", partition=0,
                         on_delivery=lambda err, msg, done=done: done.append(time.perf_counter())
                         if err is None else None)
        producer.flush(60)
        if done:
            times.append(done[0] - killed)
        cluster.start_node(leader)
        cluster.wait_ready(60, nodes=[leader])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the restarted broker must be back in the ISR
            with Admin(cluster.bootstrap_servers) as admin:
                (desc,) = admin.describe_topics([topic])
            if len(desc.partitions[0].isr) == 3:
                break
            time.sleep(0.2)
    return times


class _AckClock:
    """An idempotent acks=all producer on its own thread, one record to each partition every
    10 ms until stopped; it notes when each partition's records are acknowledged and each
    record's produce-to-ack latency."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.acks: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.latencies: list[tuple[float, float]] = []  # (acknowledged at, latency)
        self.errors = 0
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1,
            "message.timeout.ms": 300_000, "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
        self._thread = threading.Thread(target=self._run, name="bench-ack-clock", daemon=True)
        self._thread.start()

    def _delivered(self, err, msg, sent: float) -> None:
        now = time.monotonic()
        if err is not None:
            self.errors += 1
            return
        self.acks[msg.partition()].append(now)
        self.latencies.append((now, now - sent))

    def _run(self) -> None:
        while not self._stop.is_set():
            if len(self._producer) < 1000:
                sent = time.monotonic()
                for p in range(self.partitions):
                    self._producer.produce(self.topic, b"x" * 100, partition=p,
                                           on_delivery=lambda err, msg, t=sent: self._delivered(err, msg, t))
            self._producer.poll(0.01)
        self._producer.flush(120)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def stall(self, start: float, end: float) -> tuple[float, float]:
        """(the longest time one partition went without an acknowledgement, the longest
        produce-to-ack latency) within [start, end]."""
        gap = 0.0
        for times in self.acks.values():
            inside = [start] + [t for t in times if start <= t <= end] + [end]
            gap = max(gap, max(b - a for a, b in zip(inside, inside[1:], strict=False)))
        worst = max((lat for at, lat in self.latencies if start <= at <= end), default=float("nan"))
        return gap, worst


def _wait_full_isr(cluster: LocalCluster, topic: str, rf: int = 3) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with Admin(cluster.bootstrap) as admin:
            (desc,) = admin.describe_topics([topic])
        if all(len(p.isr) == rf for p in desc.partitions):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: no full ISR 90 s after a restart")


def rolling_restart_stalls(cluster: LocalCluster, topic: str = "roll", down_s: float = 5.0) -> list[Row]:
    """The longest produce stall while every node in turn is down for `down_s` and started
    again: first a rolling restart (SIGTERM, a controlled shutdown), then kill -9 of each.
    3 partitions, RF 3, min.insync.replicas 2, an idempotent acks=all producer throughout."""
    _create(cluster, topic, 3, 3, min_isr=2)
    clock = _AckClock(cluster.bootstrap_servers, topic, 3)
    rows = []
    try:
        time.sleep(2)  # warm-up: the producer's first acks before the first stop
        for how in ("clean stop", "kill -9"):
            start = time.monotonic()
            for node_id in sorted(cluster.nodes):
                if how == "kill -9":
                    cluster.kill(node_id)
                else:
                    cluster.stop_node(node_id)
                time.sleep(down_s)  # the downtime being measured
                cluster.start_node(node_id, wait=True, timeout=90)
                _wait_full_isr(cluster, topic)
            gap, worst = clock.stall(start, time.monotonic())
            rows.append(Row(f"rolling restart, {how} of each node ({down_s:g} s down): longest produce stall",
                            f"{gap:.2f} s",
                            f"longest time one of 3 partitions went without an acks=all ack; worst "
                            f"produce-to-ack latency {worst:.2f} s; RF 3, min.insync.replicas 2, idempotent "
                            "producer, a record per partition every 10 ms"))
    finally:
        clock.stop()
    if clock.errors:
        rows.append(Row("rolling restart: failed sends", str(clock.errors)))
    return rows


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _rss_with_many_partitions(cluster: LocalCluster, partitions: int = 1000) -> Row:
    """Broker resident memory hosting `partitions` partitions, each with a little data."""
    pid = cluster.nodes[1].process.pid
    before = _rss_mb(pid)
    _create(cluster, "many", partitions, 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20,
                                        "log_level": 0})
    for p in range(partitions):
        for _ in range(10):
            producer.produce("many", b"x" * RECORD, partition=p)
        producer.poll(0)
    producer.flush(120)
    return Row(f"broker RSS with {partitions} partitions (10 KiB each)", f"{_rss_mb(pid):.0f} MB",
               f"{before:.0f} MB before creating them")


def run(records: int = 100_000) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="raftka-bench-1-") as tmp:
        cluster = _cluster(tmp, 1)
        try:
            _create(cluster, "b1", 1, 1)
            t = _confluent_produce(cluster.bootstrap_servers, "b1", records, "1")
            rows.append(Row("1 broker, acks=1, produce, confluent-kafka", _rate(records, t)))
            t = _sdk_produce(cluster.bootstrap_servers, "b1", records // 2, 1)
            rows.append(Row("1 broker, acks=1, produce, raftka SDK", _rate(records // 2, t)))
            total = records + records // 2
            rows.append(_consume_row("1 broker, consume, confluent-kafka", _confluent_consume,
                                     cluster.bootstrap_servers, "b1", 1, total))
            rows.append(_consume_row("1 broker, consume, raftka SDK", _sdk_consume,
                                     cluster.bootstrap_servers, "b1", 1, total))
            rows.append(_rss_with_many_partitions(cluster))
        finally:
            cluster.stop()
    with tempfile.TemporaryDirectory(prefix="raftka-bench-3-") as tmp:
        cluster = _cluster(tmp, 3)
        try:
            _create(cluster, "b3", 1, 3, min_isr=2)
            t = _confluent_produce(cluster.bootstrap_servers, "b3", records, "all")
            rows.append(Row("3 brokers RF=3, acks=all, produce, confluent-kafka", _rate(records, t)))
            t = _sdk_produce(cluster.bootstrap_servers, "b3", records // 2, "all")
            rows.append(Row("3 brokers RF=3, acks=all, produce, raftka SDK", _rate(records // 2, t)))
            total = records + records // 2
            rows.append(_consume_row("3 brokers, consume, confluent-kafka", _confluent_consume,
                                     cluster.bootstrap_servers, "b3", 1, total))
            p50, p99, offered = _latency_at_fixed_rate(cluster.bootstrap_servers, "b3")
            rows.append(Row("3 brokers RF=3, acks=all, latency at 10 MB/s", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                            f"confluent-kafka, linger.ms 1, 5 s; offered {offered:.1f} MB/s"))
            times = _failover_times(cluster, "b3")
            rows.append(Row("failover: kill -9 leader -> first acks=all ack",
                            f"median {statistics.median(times):.2f} s" if times else "no successful produce",
                            "runs: " + ", ".join(f"{x:.2f}" for x in times)
                            + f" s (broker.session.timeout.ms {SESSION_TIMEOUT_MS}, "
                            f"heartbeat {HEARTBEAT_MS} ms)"))
            rows += rolling_restart_stalls(cluster)
        finally:
            cluster.stop()
    return rows


def format_table(rows: list[Row]) -> str:
    lines = ["| case | result | detail |", "|---|---|---|"]
    lines += [f"| {r.case} | {r.value} | {r.detail} |" for r in rows]
    return "\n".join(lines)


def produce_rf3(records: int = 100_000, runs: int = 5) -> Row:
    """Only the "3 brokers RF=3, acks=all, produce, confluent-kafka" case, `runs` times on one
    cluster: the median and every run (a quick before/after check of the produce path)."""
    with tempfile.TemporaryDirectory(prefix="raftka-bench-3-") as tmp:
        cluster = _cluster(tmp, 3)
        try:
            _create(cluster, "b3", 1, 3, min_isr=2)
            rates = sorted(records * RECORD / MB / _confluent_produce(cluster.bootstrap_servers, "b3", records, "all")
                           for _ in range(runs))
        finally:
            cluster.stop()
    return Row("3 brokers RF=3, acks=all, produce, confluent-kafka", f"{statistics.median(rates):.1f} MB/s",
               f"median of {runs} runs of {records} records: " + ", ".join(f"{r:.0f}" for r in rates) + " MB/s")


if __name__ == "__main__":
    import sys

    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    if sys.argv[1:2] == ["produce-rf3"]:  # python -m bench.cluster_bench produce-rf3 [RECORDS [RUNS]]
        print(format_table([produce_rf3(*(int(a) for a in sys.argv[2:4]))]))
    elif sys.argv[1:2] == ["rolling"]:  # python -m bench.cluster_bench rolling [DOWN_S]
        with tempfile.TemporaryDirectory(prefix="raftka-bench-3-") as tmp:
            cluster = _cluster(tmp, 3)
            try:
                print(format_table(rolling_restart_stalls(cluster, down_s=float(sys.argv[2]) if sys.argv[2:3] else 5.0)))
            finally:
                cluster.stop()
    else:
        print(format_table(run()))
