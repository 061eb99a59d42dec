"""The cost of security: RF=3 acks=all produce (and a full read) with librdkafka over
SASL_SSL (SCRAM-SHA-512, TLS 1.3; brokers replicate over SASL_SSL too) next to PLAINTEXT.

Under TLS the broker cannot sendfile record bytes (the kernel does not encrypt): fetch
responses are read from the segments in a worker thread and written through the TLS
stream (broker/net/zero_copy.py), so the read path is measured too. Run alone:

    .venv/bin/python -m bench.security_bench [records]
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass

import confluent_kafka

from raftka.client.admin import NewTopic
from raftka.client.blocking import Admin
from raftka.testing.local_cluster import LocalCluster, free_port_base
from raftka.testing.secure_cluster import secure_cluster

RECORD = 1024
RECORDS = 50_000
MB = 1_000_000


@dataclass(frozen=True)
class Result:
    protocol: str
    produce_mb_s: float
    consume_mb_s: float


def _measure(cluster: LocalCluster, client: dict, records: int) -> tuple[float, float]:
    with Admin(cluster.bootstrap_servers, security=cluster.client_security) as admin:
        admin.create_topics([NewTopic("bench-sec", 3, 3, {"min.insync.replicas": "2"})])
    producer = confluent_kafka.Producer({**client, "acks": "all", "linger.ms": 5, "batch.size": 262144})
    value = b"x" * RECORD
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce("bench-sec", value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - start
    consumer = confluent_kafka.Consumer({**client, "group.id": "bench-sec", "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
    # assign, not subscribe: the figure is the fetch path's, without a group join.
    consumer.assign([confluent_kafka.TopicPartition("bench-sec", p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(3)])
    seen, start = 0, time.perf_counter()
    deadline = start + 120
    while seen < records and time.perf_counter() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                seen += 1
    consume_s = time.perf_counter() - start
    consumer.close()
    return records * RECORD / MB / produce_s, seen * RECORD / MB / consume_s


def run(records: int = RECORDS) -> list[Result]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = LocalCluster(f"{tmp}/plain", 3, port_base=free_port_base(3), log_level="WARNING")
        try:
            plain.start_and_wait(90)
            results.append(Result("PLAINTEXT", *_measure(plain, {"bootstrap.servers": plain.bootstrap_servers},
                                                         records)))
        finally:
            plain.stop()
        secure, setup = secure_cluster(f"{tmp}/secure", 3, port_base=free_port_base(3), log_level="WARNING")
        try:
            secure.start_and_wait(90)
            client = {"bootstrap.servers": secure.bootstrap_servers, "security.protocol": "SASL_SSL",
                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": setup.admin_user,
                      "sasl.password": setup.admin_password, "ssl.ca.location": str(setup.ca_path)}
            results.append(Result("SASL_SSL", *_measure(secure, client, records)))
        finally:
            secure.stop()
    return results


def format_table(results: list[Result]) -> str:
    lines = ["| protocol | produce RF=3 acks=all MB/s | consume MB/s |", "|---|---|---|"]
    for r in results:
        lines.append(f"| {r.protocol} | {r.produce_mb_s:.1f} | {r.consume_mb_s:.1f} |")
    if len(results) == 2 and results[0].produce_mb_s and results[0].consume_mb_s:
        lines.append(f"| SASL_SSL / PLAINTEXT | {results[1].produce_mb_s / results[0].produce_mb_s:.2f} | "
                     f"{results[1].consume_mb_s / results[0].consume_mb_s:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run(int(sys.argv[1]) if len(sys.argv) > 1 else RECORDS)))
