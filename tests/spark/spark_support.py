"""Helpers for the Spark tests: topics and produced records on a real raftka node."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from raftka.client.admin import NewTopic
from raftka.client.blocking import Admin, Producer
from tests.support import wait_until

BASE_TS = 1_700_000_000_000


def bytecode_spark_home(directory: Path) -> Path:
    """A SPARK_HOME (in `directory`) for pip's pyspark whose Python workers import pyspark
    from site-packages, with its cached bytecode.

    Spark puts $SPARK_HOME/python/lib/pyspark.zip first on a Python worker's PYTHONPATH
    (PythonUtils.sparkPythonPath), and pip's pyspark ships that zip without bytecode: each
    worker compiles every pyspark module it imports (0.8 s of CPU against 0.24 s, measured
    for the streaming source's worker). A streaming source's worker must connect back
    within 10 s, fixed in Spark 4.3 (PythonWorkerFactory.createSimpleWorker; neither
    spark.python.use.daemon nor any other setting changes it): on CI's loaded 2 cores the
    compiling worker missed it ("Python worker failed to connect back"). This home links
    everything of pyspark's but python/, so the zip is not there and the worker imports the
    same pyspark, installed, from site-packages."""
    import pyspark

    installed = Path(pyspark.__file__).parent
    home = directory / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    for entry in installed.iterdir():
        if entry.name != "python" and not (home / entry.name).exists():
            (home / entry.name).symlink_to(entry)
    (home / "python" / "lib").mkdir(parents=True, exist_ok=True)
    return home


def create_topic(bootstrap: str, name: str, partitions: int = 3,
                 configs: Mapping[str, str] | None = None) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, dict(configs or {}))])
        wait_until(lambda: all(p.leader >= 0 for p in admin.describe_topics([name])[0].partitions),
                   timeout=30, what=f"{name} to have leaders")


def produce(bootstrap: str, topic: str, count: int, *, partitions: int = 3, start: int = 0,
            headers: bool = True, value_size: int = 20) -> list[dict]:
    """`count` records numbered from `start`, record i to partition i % partitions
    with timestamp BASE_TS + i*1000; returns them as rows (with their offsets)."""
    rows: list[dict] = []
    with Producer(bootstrap, acks="all") as producer:
        futures = []
        for i in range(start, start + count):
            key = f"key-{i}".encode()
            value = (f"value-{i}-".encode() * value_size)[:value_size]
            hdrs = [("i", str(i).encode()), ("none", None)] if headers else None
            futures.append((i, key, value, hdrs, producer.send(
                topic, value, key=key, headers=hdrs, partition=i % partitions,
                timestamp_ms=BASE_TS + i * 1000)))
        for i, key, value, hdrs, future in futures:
            meta = future.result(timeout=30)
            rows.append({"key": key, "value": value, "topic": topic, "partition": meta.partition,
                         "offset": meta.offset, "ts_ms": BASE_TS + i * 1000, "i": i,
                         "headers": [{"key": k, "value": v} for k, v in hdrs] if hdrs else None})
    return rows


def row_key(row) -> tuple[int, int]:
    return (row["partition"], row["offset"])


def read_back(bootstrap: str, topic: str, timeout: float = 60.0) -> list[dict]:
    """Every record of `topic` up to its high watermarks, read with confluent-kafka (an
    independent client): dicts of partition, offset, key, value, headers, in offset order."""
    import time

    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back",
                                         "enable.auto.commit": False, "log_level": 0})
    try:
        meta = consumer.list_topics(topic, timeout=30)
        partitions = sorted(meta.topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                                  timeout=30)[1] for p in partitions}
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        rows: list[dict] = []
        position = {p: 0 for p in partitions}
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"read {position} of {topic}, expected up to {ends}")
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            position[msg.partition()] = msg.offset() + 1
            rows.append({"partition": msg.partition(), "offset": msg.offset(), "key": msg.key(),
                         "value": msg.value(), "headers": msg.headers()})
    finally:
        consumer.close()
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))
