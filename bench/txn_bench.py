"""Transactions: transactional produce throughput and commit latency (p50/p99) with
librdkafka, N transactions of 100 records of 100 bytes on 3 partitions at RF=3, next to
an idempotent producer flushing every 100 records (the same batches without the
AddPartitions / EndTxn / marker round trips). Bounded: each phase stops at its time
budget and reports what it did. Run alone:

    .venv/bin/python -m bench.txn_bench [transactions]
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass

import confluent_kafka

from raftka.testing.local_cluster import FAST_FAILURE_DETECTION, LocalCluster, free_port_base

TRANSACTIONS = 200
RECORDS_PER_BATCH = 100
VALUE = b"x" * 100
PHASE_BUDGET_S = 20.0
TOPIC = "bench-txn"


@dataclass(frozen=True)
class Result:
    mode: str
    batches: int
    records_s: float
    p50_ms: float
    p99_ms: float


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _phase(mode: str, producer: confluent_kafka.Producer, batches: int, begin, end) -> Result:
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(batches):
        begin()
        for j in range(RECORDS_PER_BATCH):
            producer.produce(TOPIC, VALUE, partition=j % 3)
        t = time.perf_counter()
        end()
        latencies.append(time.perf_counter() - t)
        if time.perf_counter() - start > PHASE_BUDGET_S:
            break
    elapsed = time.perf_counter() - start
    latencies.sort()
    return Result(mode, len(latencies), len(latencies) * RECORDS_PER_BATCH / elapsed,
                  _percentile(latencies, 0.50) * 1000, _percentile(latencies, 0.99) * 1000)


def run(transactions: int = TRANSACTIONS) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(f"{tmp}/txn", 3, port_base=free_port_base(3), log_level="WARNING",
                               extra_config={**FAST_FAILURE_DETECTION,
                                             "transaction.state.log.num.partitions": "3"})
        try:
            cluster.start_and_wait(90)
            cluster.create_topic(TOPIC, 3, 3)
            common = {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5}
            txn = confluent_kafka.Producer({**common, "transactional.id": "bench-txn"})
            txn.init_transactions(60)
            results = [_phase("transactional (commit per 100)", txn, transactions,
                              txn.begin_transaction, lambda: txn.commit_transaction(60))]
            idem = confluent_kafka.Producer({**common, "enable.idempotence": True})

            def flush() -> None:
                if idem.flush(60):
                    raise RuntimeError("idempotent flush timed out")

            results.append(_phase("idempotent (flush per 100)", idem, transactions, lambda: None, flush))
            return results
        finally:
            cluster.stop()


def format_table(results: list[Result]) -> str:
    lines = ["| producer | batches of 100 | records/s | commit or flush p50 ms | p99 ms |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.mode} | {r.batches} | {r.records_s:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run(int(sys.argv[1]) if len(sys.argv) > 1 else TRANSACTIONS)))
