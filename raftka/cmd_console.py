"""`raftka produce` / `raftka consume`: the console producer and consumer.

Like kafka-console-producer/consumer: the producer sends one record per
stdin line (split into key and value at `--key-separator` when given); the
consumer prints values (and keys etc. with `--property print.key=true`) one
per line. Exit status: 0 done, 1 the cluster said no or is unreachable,
2 bad arguments.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

import click
import trio

from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaError, KafkaTimeoutError
from raftka.client.producer import AsyncProducer
from raftka.client.records import ConsumerRecord, TopicPartition
from raftka.command_config import security as command_security

METADATA_TIMEOUT_MS = 10000


def _fail(command: str, message: str, status: int = 1) -> int:
    click.echo(f"raftka {command}: {message}", err=True)
    return status


def produce(bootstrap: str, topic: str, key_separator: str | None, acks: str,
            compression: str | None, partition: int | None, linger_ms: int,
            stdin: IO[bytes] | None = None) -> int:
    source = stdin if stdin is not None else sys.stdin.buffer
    sep = None if key_separator is None else key_separator.encode()

    async def main() -> int:
        failures: list[BaseException] = []
        async with AsyncProducer(bootstrap, acks=acks, compression_type=compression, security=command_security(),
                                 linger_ms=linger_ms, metadata_timeout_ms=METADATA_TIMEOUT_MS,
                                 delivery_timeout_ms=30000, request_timeout_ms=10000) as producer:
            # Fail fast and clearly on an unknown topic, before reading stdin.
            await producer.partitions_for(topic)
            count = 0
            while True:
                line = await trio.to_thread.run_sync(source.readline)
                if not line:
                    break
                line = line.rstrip(b"\r\n")
                key = None
                if sep is not None:
                    if sep not in line:
                        return _fail("produce", f"line {count + 1} has no key separator "
                                     f"{key_separator!r}: {line[:60]!r}", 2)
                    key, line = line.split(sep, 1)
                fut = producer.send_nowait(topic, line, key=key, partition=partition)
                fut.add_callback(lambda _m, exc: exc is not None and failures.append(exc))
                count += 1
            await producer.flush()
        if failures:
            return _fail("produce", f"{len(failures)} record(s) not delivered: {failures[0]}")
        return 0

    try:
        return trio.run(main)
    except ValueError as exc:
        return _fail("produce", str(exc), 2)
    except KafkaError as exc:
        return _fail("produce", f"topic {topic!r}: {exc}")


def parse_properties(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--property {pair!r} is not key=value (e.g. print.key=true)")
        out[key.strip()] = value
    return out


def format_record(record: ConsumerRecord, props: dict[str, str]) -> bytes:
    sep = props.get("key.separator", "\t").encode()
    parts: list[bytes] = []
    if props.get("print.timestamp", "false").lower() == "true":
        kind = "CreateTime" if record.timestamp_type == 0 else "LogAppendTime"
        parts.append(f"{kind}:{record.timestamp}".encode())
    if props.get("print.partition", "false").lower() == "true":
        parts.append(f"Partition:{record.partition}".encode())
    if props.get("print.offset", "false").lower() == "true":
        parts.append(f"Offset:{record.offset}".encode())
    if props.get("print.key", "false").lower() == "true":
        parts.append(b"null" if record.key is None else record.key)
    parts.append(b"null" if record.value is None else record.value)
    return sep.join(parts)


def consume(bootstrap: str, topic: str, from_beginning: bool, max_messages: int | None,
            partition: int | None, offset: str | None, properties: Sequence[str],
            timeout_ms: int | None, out: IO[bytes] | None = None) -> int:
    try:
        props = parse_properties(properties)
    except ValueError as exc:
        return _fail("consume", str(exc), 2)
    if offset is not None and partition is None:
        return _fail("consume", "--offset needs --partition (offsets are per partition)", 2)
    if offset is not None and offset not in ("earliest", "latest") and not offset.isdigit():
        return _fail("consume", f"--offset {offset!r} must be a number, 'earliest' or 'latest'",
                     2)
    sink = out if out is not None else sys.stdout.buffer

    async def main() -> int:
        reset = "earliest" if from_beginning or offset == "earliest" else "latest"
        async with AsyncConsumer(bootstrap, auto_offset_reset=reset, security=command_security()) as consumer:
            parts = await consumer._require_cluster().wait_for_partitions(
                topic, METADATA_TIMEOUT_MS / 1000)
            if partition is not None and partition not in parts:
                return _fail("consume", f"topic {topic!r} has no partition {partition} "
                             f"(partitions: 0..{len(parts) - 1})", 2)
            tps = [TopicPartition(topic, p) for p in ([partition] if partition is not None
                                                      else parts)]
            consumer.assign(tps)
            if offset is not None and offset.isdigit():
                consumer.seek(tps[0], int(offset))
            seen = 0
            while max_messages is None or seen < max_messages:
                wait = 1000 if timeout_ms is None else timeout_ms
                batch = await consumer.poll(wait, None if max_messages is None
                                            else max_messages - seen)
                if not batch:
                    if timeout_ms is not None:
                        break
                    continue
                for records in batch.values():
                    for record in records:
                        sink.write(format_record(record, props) + b"\n")
                        seen += 1
                sink.flush()
            click.echo(f"Processed a total of {seen} messages", err=True)
            return 0

    try:
        return trio.run(main)
    except KeyboardInterrupt:
        return 0
    except KafkaTimeoutError as exc:
        return _fail("consume", f"topic {topic!r}: {exc}")
    except KafkaError as exc:
        return _fail("consume", f"topic {topic!r}: {exc}")
