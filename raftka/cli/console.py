"""`raftka produce` / `raftka consume`: the console producer and consumer.

Like kafka-console-producer/consumer (their `--property` keys are in
raftka/cli/console_format.py): the producer sends one record per stdin line; the
consumer prints one line per record (or a JSON object with `--json`).

Ctrl-C (SIGINT) or SIGTERM stops either at once: the producer stops reading,
waits for what it already sent, and the consumer stops polling and commits
(with `--group`); both then print "Processed a total of N messages" on
stderr, as kafka-console-consumer does. A second Ctrl-C abandons that wait.

Exit status (cli/runner.py): 0 done (also after Ctrl-C), 1 the cluster said no or is
unreachable, 2 bad arguments or input.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, TypeVar

import click
import trio

from raftka.cli.console_format import (
    CONSUMER_PROPERTIES,
    PRODUCER_PROPERTIES,
    LineError,
    LineReader,
    RecordFormatter,
    parse_properties,
    record_json,
)
from raftka.cli.interrupts import stop_on_signal
from raftka.cli.options import security as command_security
from raftka.cli.runner import USAGE, UsageError, fail, run
from raftka.client.admin import AsyncAdmin
from raftka.client.cluster import Cluster
from raftka.client.consumer import AsyncConsumer
from raftka.client.list_offsets import list_offsets
from raftka.client.producer import AsyncProducer
from raftka.client.records import ConsumerRecord, ShareConsumerRecord, TopicPartition
from raftka.client.share_consumer import AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType

METADATA_TIMEOUT_MS = 10000
READ_CHUNK = 1 << 16
# The producer has no buffer.memory bound of its own: past this many undelivered records the
# console producer stops reading stdin until they are delivered.
MAX_UNDELIVERED = 100_000
R = TypeVar("R", ConsumerRecord, ShareConsumerRecord)


def _run(command: str, main: Callable[[], Awaitable[int]]) -> int:
    """The runner's one-line errors (cli/runner.py), or main's own status."""
    status, result = run(command, main)
    return status or result or 0


def _chunks(source: IO[bytes]) -> Callable[[], bytes]:
    """A blocking read of whatever stdin has (up to READ_CHUNK bytes; b"" at EOF).

    os.read on the descriptor, not the buffered object: a thread abandoned in the read at
    Ctrl-C must not hold the BufferedReader's lock while the interpreter exits."""
    try:
        fd = source.fileno()
    except (AttributeError, OSError, ValueError):
        read1 = getattr(source, "read1", source.read)
        return lambda: read1(READ_CHUNK)
    return lambda: os.read(fd, READ_CHUNK)


async def _partitions_of(cluster: Cluster, topic: str) -> list[int]:
    """`topic`'s partition ids, waited for up to METADATA_TIMEOUT_MS; a cluster no broker of
    which answers fails the command at once (the SDK's consumers would wait for it)."""
    await cluster.refresh_metadata([topic])
    return await cluster.wait_for_partitions(topic, METADATA_TIMEOUT_MS / 1000)


async def _topic_exists(bootstrap: str, topic: str) -> bool:
    """Whether `topic` exists, asked without auto-creation (the producer's metadata creates it)."""
    async with AsyncAdmin(bootstrap, security=command_security(), default_api_timeout_ms=0) as admin:
        return topic in await admin.list_topics(include_internal=True)


def produce(bootstrap: str, topic: str, key_separator: str | None, acks: str,
            compression: str | None, partition: int | None, linger_ms: int,
            stdin: IO[bytes] | None = None, properties: Sequence[str] = ()) -> int:
    try:
        props = parse_properties(properties, PRODUCER_PROPERTIES)
        if key_separator is not None:  # --key-separator S: parse.key=true, key.separator=S
            props = {**props, "parse.key": "true", "key.separator": key_separator}
        reader = LineReader.from_properties(props)
    except ValueError as exc:
        return fail("produce", str(exc), USAGE)
    read = _chunks(stdin if stdin is not None else sys.stdin.buffer)
    counts = {"sent": 0, "done": 0}
    failures: list[BaseException] = []

    def on_delivery(_metadata: object, error: BaseException | None) -> None:
        counts["done"] += 1
        if error is not None:
            failures.append(error)

    async def main() -> int:
        async with AsyncProducer(bootstrap, acks=acks, compression_type=compression, security=command_security(),
                                 linger_ms=linger_ms, metadata_timeout_ms=METADATA_TIMEOUT_MS,
                                 delivery_timeout_ms=30000, request_timeout_ms=10000) as producer:
            existed = await _topic_exists(bootstrap, topic)
            # Fail fast and clearly on an unknown topic, before reading stdin.
            await producer.partitions_for(topic)
            if not existed:  # Kafka's console producer says nothing; a typo deserves a line
                click.echo(f"raftka produce: topic {topic!r} did not exist; the broker created it "
                           "(auto.create.topics.enable=true): check the name if that was not meant",
                           err=True)
            send = producer.send_nowait
            async with trio.open_nursery() as nursery:
                reading = trio.CancelScope()
                await nursery.start(stop_on_signal, reading, nursery.cancel_scope)
                with reading:
                    pending = b""
                    while True:
                        chunk = await trio.to_thread.run_sync(read, abandon_on_cancel=True)
                        if not chunk:
                            lines = [pending] if pending else []
                        else:
                            lines = (pending + chunk).split(b"\n")
                            pending = lines.pop()
                        for line in lines:
                            if line.endswith(b"\r"):
                                line = line[:-1]
                            if reader.plain:
                                send(topic, line, partition=partition).add_callback(on_delivery)
                            else:
                                try:
                                    key, value, headers = reader.parse(line)
                                except LineError as exc:
                                    raise UsageError(f"line {counts['sent'] + 1}: {exc}: "
                                                     f"{line[:60]!r}") from None
                                send(topic, value, key=key, headers=headers,
                                     partition=partition).add_callback(on_delivery)
                            counts["sent"] += 1
                        if not chunk:
                            break
                        if counts["sent"] - counts["done"] > MAX_UNDELIVERED:
                            await producer.flush()
                        await trio.lowlevel.checkpoint()
                await producer.flush()
                nursery.cancel_scope.cancel()
        click.echo(f"Processed a total of {counts['done'] - len(failures)} messages", err=True)
        if failures:
            return fail("produce", f"{len(failures)} record(s) not delivered: {failures[0]}")
        if counts["sent"] > counts["done"]:
            return fail("produce", f"{counts['sent'] - counts['done']} record(s) abandoned "
                                   "(interrupted twice)")
        return 0

    return _run("produce", main)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a closed pipe is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def parse_start_timestamp(text: str) -> int:
    """`--from-timestamp`: epoch milliseconds, or an ISO-8601 date-time (UTC unless it says)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--from-timestamp {text!r} is neither epoch milliseconds nor an "
                         "ISO-8601 date-time (e.g. 2026-11-24T08:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def consume(bootstrap: str, topic: str, from_beginning: bool, max_messages: int | None,
            partition: int | None, offset: str | None, properties: Sequence[str],
            timeout_ms: int | None, out: IO[bytes] | None = None, *, group: str | None = None,
            from_timestamp: str | None = None, as_json: bool = False,
            isolation_level: str = "read_uncommitted", group_protocol: str = "classic",
            share_group: str | None = None, acknowledge: str = "accept") -> int:
    try:
        formatter = RecordFormatter.from_properties(parse_properties(properties,
                                                                     CONSUMER_PROPERTIES))
        start_ms = None if from_timestamp is None else parse_start_timestamp(from_timestamp)
    except ValueError as exc:
        return fail("consume", str(exc), USAGE)
    if offset is not None and partition is None:
        return fail("consume", "--offset needs --partition (offsets are per partition)", USAGE)
    if offset is not None and offset not in ("earliest", "latest") and not offset.isdigit():
        return fail("consume", f"--offset {offset!r} must be a number, 'earliest' or 'latest'",
                    USAGE)
    if share_group is not None and (group is not None or partition is not None or offset is not None
                                    or start_ms is not None or from_beginning):
        return fail("consume", "--share-group cannot be combined with --group, --partition, --offset, "
                               "--from-timestamp or --from-beginning (the share group assigns the records; "
                               "where it starts is its share.auto.offset.reset config)", USAGE)
    if share_group is None and acknowledge != "accept":
        return fail("consume", "--reject and --release need --share-group", USAGE)
    if group is None and group_protocol != "classic":
        return fail("consume", "--group-protocol needs --group", USAGE)
    if group is not None and (partition is not None or offset is not None):
        return fail("consume", "--group cannot be combined with --partition or --offset "
                               "(the group assigns partitions and keeps the offsets)", USAGE)
    if group is not None and start_ms is not None:
        return fail("consume", "--from-timestamp needs no --group; to move a group's offsets use "
                               "`raftka groups reset-offsets --to-datetime`", USAGE)
    if sum(x is not None and x is not False for x in (from_beginning or None, offset,
                                                        start_ms)) > 1:
        return fail("consume", "give only one of --from-beginning, --offset, --from-timestamp",
                    USAGE)
    sink = out if out is not None else sys.stdout.buffer
    render = record_json if as_json else formatter.format

    if share_group is not None:
        if isolation_level != "read_uncommitted":
            return fail("consume", "a share group's isolation level is its group config share.isolation.level "
                                   "(raftka configs alter --entity-type groups), not --isolation-level", USAGE)
        return _consume_shared(bootstrap, topic, share_group, AcknowledgeType[acknowledge.upper()], max_messages,
                               timeout_ms, sink, render)

    printed = _Printed()

    async def main() -> int:
        reset = "earliest" if from_beginning or offset == "earliest" else "latest"
        async with AsyncConsumer(bootstrap, auto_offset_reset=reset, group_id=group, group_protocol=group_protocol,
                                 request_timeout_ms=10000, isolation_level=isolation_level,
                                 client_id="raftka-console-consumer", security=command_security()) as consumer:
            cluster = consumer._require_cluster()
            parts = await _partitions_of(cluster, topic)
            if partition is not None and partition not in parts:
                return fail("consume", f"topic {topic!r} has no partition {partition} "
                            f"(partitions: 0..{len(parts) - 1})", USAGE)
            if group is not None:
                consumer.subscribe([topic])
            else:
                tps = [TopicPartition(topic, p) for p in ([partition] if partition is not None
                                                          else parts)]
                consumer.assign(tps)
                if offset is not None and offset.isdigit():
                    consumer.seek(tps[0], int(offset))
                if start_ms is not None:
                    found = await list_offsets(cluster, dict.fromkeys(tps, start_ms),
                                               timeout=METADATA_TIMEOUT_MS / 1000)
                    for tp in tps:
                        if found.get(tp, -1) >= 0:
                            consumer.seek(tp, found[tp])
                        else:  # no record that recent: start at the end, as Kafka answers
                            consumer.seek_to_end(tp)
            async def fetch(wait_ms: int, room: int | None) -> list[ConsumerRecord]:
                return [r for records in (await consumer.poll(wait_ms, room)).values() for r in records]

            await _print_records(fetch, lambda record: sink.write(render(record)), sink, printed, max_messages,
                                 timeout_ms)
        return 0

    try:
        return _run("consume", main)
    finally:
        click.echo(f"Processed a total of {printed.count} messages", err=True)


class _Printed:
    count = 0


async def _print_records(fetch: Callable[[int, int | None], Awaitable[Sequence[R]]], emit: Callable[[R], object],
                         sink: IO[bytes], printed: _Printed, max_messages: int | None,
                         timeout_ms: int | None) -> None:
    """The console consumers' loop: `emit` each record `fetch(wait_ms, room)` brings until
    --max-messages, --timeout-ms without a record, Ctrl-C / SIGTERM, or a closed stdout."""
    async with trio.open_nursery() as nursery:
        reading = trio.CancelScope()
        await nursery.start(stop_on_signal, reading, nursery.cancel_scope)
        with reading:
            while max_messages is None or printed.count < max_messages:
                room = None if max_messages is None else max_messages - printed.count
                batch = await fetch(1000 if timeout_ms is None else timeout_ms, room)
                if not batch:
                    if timeout_ms is not None:
                        break
                    continue
                try:
                    for record in batch if room is None else batch[:room]:
                        emit(record)
                        printed.count += 1
                    sink.flush()
                except BrokenPipeError:  # `raftka consume ... | head`: the reader left
                    _silence_stdout()
                    break
        nursery.cancel_scope.cancel()


def _consume_shared(bootstrap: str, topic: str, group: str, kind: AcknowledgeType, max_messages: int | None,
                    timeout_ms: int | None, sink: IO[bytes],
                    render: Callable[[ShareConsumerRecord], bytes]) -> int:
    """`raftka consume --share-group`, as kafka-console-share-consumer: each record printed is
    acknowledged (ACCEPT, or RELEASE / REJECT), one by one in explicit mode; the records a
    fetch brought beyond --max-messages are not printed and go back to the group at the close."""
    printed = _Printed()

    async def main() -> int:
        async with AsyncShareConsumer(bootstrap, group_id=group, acknowledgement_mode="explicit",
                                      request_timeout_ms=10000, client_id="raftka-console-share-consumer",
                                      security=command_security()) as consumer:
            await _partitions_of(consumer._require_cluster(), topic)
            consumer.subscribe([topic])

            async def fetch(wait_ms: int, room: int | None) -> list[ShareConsumerRecord]:
                return await consumer.poll(wait_ms)

            def emit(record: ShareConsumerRecord) -> None:
                sink.write(render(record))
                consumer.acknowledge(record, kind)

            await _print_records(fetch, emit, sink, printed, max_messages, timeout_ms)
        return 0

    try:
        return _run("consume", main)
    finally:
        click.echo(f"Processed a total of {printed.count} messages", err=True)
