"""The cost of metrics: produce throughput with and without a Prometheus scrape every second.

One cluster of 3 brokers with the metrics endpoint on, a topic of 3 partitions at RF=3,
confluent-kafka producing acks=all 1 KiB records. Runs alternate: no scraper, then a
thread scraping every node's /metrics once a second (as a Prometheus with a 1 s interval
would, 3x harsher than the common 15 s). The hot-path counters are on in both runs (they
always are); the difference is the scrapes. Also reported: the scrape's own time and size.

    .venv/bin/python -m bench.metrics_bench [RECORDS [ROUNDS]]
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import urllib.request

from bench.cluster_bench import MB, RECORD, Row, _confluent_produce, _create, format_table
from raftka.testing.local_cluster import (
    METRICS_PORT_OFFSET,
    PORT_OFFSETS,
    LocalCluster,
    free_port_base,
)


class Scraper:
    def __init__(self, urls: list[str], interval_s: float = 1.0) -> None:
        self.urls, self.interval_s = urls, interval_s
        self.stop = threading.Event()
        self.times: list[float] = []
        self.sizes: list[int] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for url in self.urls:
                start = time.perf_counter()
                with urllib.request.urlopen(url, timeout=10) as answer:
                    self.sizes.append(len(answer.read()))
                self.times.append(time.perf_counter() - start)
            self.stop.wait(self.interval_s)

    def __enter__(self) -> Scraper:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(15)


def run(records: int = 100_000, rounds: int = 3) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="raftka-bench-metrics-") as tmp:
        base = free_port_base(3, offsets=PORT_OFFSETS + (METRICS_PORT_OFFSET,))
        cluster = LocalCluster(tmp, 3, port_base=base, log_level="WARNING", metrics=True)
        cluster.start()
        cluster.wait_ready(90)
        try:
            _create(cluster, "m3", 3, 3, min_isr=2)
            urls = list(cluster.metrics_urls().values())
            plain, scraped = [], []
            times: list[float] = []
            sizes: list[int] = []
            for _ in range(rounds):
                plain.append(records * RECORD / MB / _confluent_produce(cluster.bootstrap_servers, "m3", records, "all"))
                with Scraper(urls) as scraper:
                    scraped.append(records * RECORD / MB
                                   / _confluent_produce(cluster.bootstrap_servers, "m3", records, "all"))
                times += scraper.times
                sizes += scraper.sizes
        finally:
            cluster.stop()
    p, s = statistics.median(plain), statistics.median(scraped)
    times = sorted(times) or [0.0]
    return [
        Row("3 brokers RF=3 acks=all produce, no scraper", f"{p:.1f} MB/s",
            f"median of {rounds}: " + ", ".join(f"{r:.0f}" for r in plain) + " MB/s"),
        Row("same, every node scraped every second", f"{s:.1f} MB/s",
            f"median of {rounds}: " + ", ".join(f"{r:.0f}" for r in scraped) + f" MB/s; ratio {s / p:.2f}"),
        Row("one scrape (3 topics' worth of series)", f"{statistics.median(times) * 1000:.1f} ms median",
            f"max {times[-1] * 1000:.1f} ms, {statistics.median(sizes or [0]) / 1000:.0f} kB"),
    ]


if __name__ == "__main__":
    import sys

    from raftka.cli.logging_setup import configure_logging

    configure_logging(level="WARNING")
    print(format_table(run(*(int(a) for a in sys.argv[1:3]))))
