"""`make bench`: run every benchmark and print its table (figures as measured, never asserted)."""

from __future__ import annotations

import os
import platform
import sys

from bench import (
    cluster_bench,
    engine_bench,
    limits_bench,
    log_bench,
    metrics_bench,
    peer_bench,
    security_bench,
    share_group_bench,
    spark_bench,
    startup_bench,
    txn_bench,
    validator_bench,
)


def main() -> None:
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(f"# raftka benchmarks — {platform.node()}, Python {sys.version.split()[0]}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs")
    print("\n## Physical limits of this machine\n")
    print(limits_bench.format_table(limits_bench.run()))
    print("\n## raftka as a library: imports, 1-node start to first ack, pytest fixture set-up\n")
    print(startup_bench.format_table(startup_bench.run()))
    print("\n## log/: partition-log append and read (1 KiB records, no fsync)\n")
    print(log_bench.format_table(log_bench.run()))
    print("\n## log/: the leader's record validation alone (~1 MiB batches of ~1 KiB records)\n")
    print(validator_bench.format_table(validator_bench.run()))
    print("\n## Brokers: throughput, latency, failover (1 KiB records, real processes on loopback)\n")
    print(cluster_bench.format_table(cluster_bench.run()))
    print("\n## Security: RF=3 acks=all produce and a full read with librdkafka, SASL_SSL (SCRAM-SHA-512, "
          "TLS 1.3, brokers replicating over SASL_SSL) next to PLAINTEXT (1 KiB records)\n")
    print(security_bench.format_table(security_bench.run()))
    print("\n## Engine room: a latency probe while 2000 partitions are created, written and deleted "
          "and a bulk writer rolls 64 MiB segments (1 node)\n")
    print(engine_bench.format_table(engine_bench.run()))
    print("\n## Metrics: produce with and without a Prometheus scrape of every node each second\n")
    print(metrics_bench.format_table(metrics_bench.run()))
    print("\n## A peer: NATS JetStream vs raftka, both driven by Python clients (1 KiB messages)\n")
    print(peer_bench.format_table(peer_bench.run()))
    print("\n## Spark: batch read of 1 M 100-byte messages from 3 partitions into a noop sink, "
          "and the raftka sink writing 1 M 100-byte rows\n")
    print(spark_bench.format_table(spark_bench.run()))
    print("\n## Transactions: librdkafka, 100 records of 100 bytes per transaction on 3 partitions, RF=3, "
          "next to an idempotent producer flushing every 100 records\n")
    print(txn_bench.format_table(txn_bench.run()))
    print("\n## Share groups: 100 000 records of 100 bytes (3 partitions, RF=3) read by a share group of 3 "
          "next to a consumer group of 3 (raftka SDK members)\n")
    print(share_group_bench.format_table(share_group_bench.run(100_000)))
    print("\nMetadata quorum commit latency and controller failover: "
          ".venv/bin/python bench/quorum_bench.py (see its docstring).")
    print("Metadata apply of one entry of 10 000 records: .venv/bin/python bench/apply_bench.py.")


if __name__ == "__main__":
    main()
