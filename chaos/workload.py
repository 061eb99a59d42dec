"""The queue workload (Jepsen's kafka queue): sequential producers and assign- or group-based consumers.

Each producer *process* sends one unique int at a time to a seeded-random
partition with acks=all and records invoke then ok/fail/info. A send whose
outcome is unknown retires the process: it goes on under a new process id with
a fresh producer, so one process's sends are never concurrent (which is what
makes nonmonotonic-send meaningful). Consumers are assigned every partition,
remember their own positions across reconnects, and record every non-empty poll.

Group mode: the consumers subscribe as members of one consumer group and
commit after every non-empty poll. Each consumer process counts the
assignments it receives (its assignment epoch), records every one as an
`assign` op naming the newly assigned partitions, and stamps its polls with
the epoch, so the checker excuses going back or skipping ahead only where a
partition was newly assigned (chaos/checker.py). A consumer whose client
fails starts a new member; what it held is then, by definition, reassigned.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from raftka.chaos.history import HistoryWriter, Op
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaError, OffsetOutOfRangeError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition

log = structlog.get_logger("chaos.workload")

# Broker answers that, on a single attempt (retries=0), prove the record was not appended.
# NOT_LEADER_OR_FOLLOWER (6) is *not* one of them: a leader that appended the record and
# then lost leadership while waiting for the ISR answers 6 too, and the record may survive
# on the new leader (a chaos run saw exactly that; calling it a failure reported a false G1a).
DEFINITE_FAILURES = frozenset({3, 5, 19})  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
#                                            NOT_ENOUGH_REPLICAS (checked before the append)


@dataclass(frozen=True)
class WorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int
    producers: int = 3
    consumers: int = 2
    rate: float = 50.0  # sends per second, all producers together
    acks: str = "all"
    idempotence: bool = False
    seed: int = 0
    request_timeout_ms: int = 4000
    delivery_timeout_ms: int = 10000
    consumer_mode: str = "assign"  # or "group"
    group_id: str = "chaos"
    session_timeout_ms: int = 6000  # the broker's group.min.session.timeout.ms is Kafka's 6 s
    # Group mode: each member leaves and a new one joins after about this many seconds, so
    # rebalances happen even when no fault happens to force one (None: never).
    rejoin_interval: float | None = 8.0
    security: Any = None  # client/security.py ClientSecurity: a secured cluster (--against)


class Recorder:
    """Stamps ops with run-relative monotonic time and wall time."""

    def __init__(self, writer: HistoryWriter, on_op: Callable[[Op], None] | None = None) -> None:
        self.writer = writer
        self.t0 = time.monotonic()
        self.on_op = on_op

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 6)

    def record(self, process, type: str, f: str, value=None, partition=None, offset=None,
               error: str | None = None, epoch: int | None = None) -> Op:
        o = self.writer.append(Op(process, type, f, value, partition, offset, self.now(), round(time.time(), 3),
                                  error, epoch))
        if self.on_op is not None:
            self.on_op(o)
        return o


class Workload:
    def __init__(self, config: WorkloadConfig, recorder: Recorder) -> None:
        self.config = config
        self.rec = recorder
        self._next_value = 0
        self._rng = random.Random(config.seed)
        self._stride = config.producers + config.consumers
        self.stop_producing = trio.Event()
        self.stop_consuming = trio.Event()
        self._tick = trio.Lock()
        self._next_slot = 0.0

    def _value(self) -> int:
        self._next_value += 1
        return self._next_value

    async def _pace(self) -> None:
        """A shared token bucket: `rate` sends per second across producers."""
        async with self._tick:
            now = trio.current_time()
            self._next_slot = max(self._next_slot + 1 / self.config.rate, now)
            wait = self._next_slot - now
        await trio.sleep(wait)

    async def run(self, nursery: trio.Nursery) -> None:
        for i in range(self.config.producers):
            nursery.start_soon(self._producer, i)
        consumer = self._group_consumer if self.config.consumer_mode == "group" else self._consumer
        for i in range(self.config.consumers):
            nursery.start_soon(consumer, self.config.producers + i)

    # --- producers -------------------------------------------------------------
    def _producer_client(self) -> AsyncProducer:
        c = self.config
        return AsyncProducer(c.bootstrap, security=c.security, client_id="chaos-producer", acks=c.acks, linger_ms=0,
                             enable_idempotence=c.idempotence, retries=2147483647 if c.idempotence else 0,
                             request_timeout_ms=c.request_timeout_ms, delivery_timeout_ms=c.delivery_timeout_ms,
                             metadata_timeout_ms=c.delivery_timeout_ms, retry_backoff_ms=100,
                             max_in_flight_requests_per_connection=1)

    async def _producer(self, process: int) -> None:
        while not self.stop_producing.is_set():
            try:
                # start() and close() must run in one task with no cancel scope between them
                async with self._producer_client() as producer:
                    process = await self._send_loop(producer, process)
            except (KafkaError, OSError) as exc:  # the cluster is unreachable: try a new client soon
                log.info("chaos.producer_start_failed", process=process, error=str(exc))
                await trio.sleep(0.5)

    async def _send_loop(self, producer: AsyncProducer, process: int) -> int:
        """Send until stopped or an outcome is unknown; returns the next process id."""
        while not self.stop_producing.is_set():
            await self._pace()
            if self.stop_producing.is_set():
                break
            value = self._value()
            partition = self._rng.randrange(self.config.partitions)
            self.rec.record(process, "invoke", "send", value, partition)
            try:
                with trio.fail_after(self.config.delivery_timeout_ms / 1000 + 5):
                    meta = await producer.send(self.config.topic, str(value).encode(), partition=partition)
            except (KafkaError, trio.TooSlowError, OSError) as exc:
                code = getattr(exc, "code", None)
                definite = not self.config.idempotence and code in DEFINITE_FAILURES
                self.rec.record(process, "fail" if definite else "info", "send", value, partition,
                                error=f"{type(exc).__name__}: {exc}")
                if not definite:
                    return process + self._stride
                await trio.sleep(0.1)
                continue
            self.rec.record(process, "ok", "send", value, meta.partition, meta.offset)
        return process

    # --- consumers ---------------------------------------------------------------
    async def _consumer(self, process: int) -> None:
        c = self.config
        positions = {p: 0 for p in range(c.partitions)}
        out_of_range = 0
        self.rec.record(process, "invoke", "assign", sorted(positions))
        self.rec.record(process, "ok", "assign", sorted(positions))
        while not self.stop_consuming.is_set():
            try:
                async with AsyncConsumer(c.bootstrap, security=c.security, client_id="chaos-consumer", auto_offset_reset="none",
                                         fetch_max_wait_ms=300, request_timeout_ms=c.request_timeout_ms) as consumer:
                    consumer.assign([TopicPartition(c.topic, p) for p in positions])
                    for p, offset in positions.items():
                        consumer.seek(TopicPartition(c.topic, p), offset)
                    while not self.stop_consuming.is_set():
                        with trio.fail_after(c.request_timeout_ms / 1000 + 5):
                            batch = await consumer.poll(timeout_ms=300)
                        records = [(r.partition, r.offset, int(r.value)) for rs in batch.values() for r in rs
                                   if r.value is not None]
                        out_of_range = 0
                        if records:
                            self.rec.record(process, "invoke", "poll")
                            self.rec.record(process, "ok", "poll", records)
                            for p, offset, _ in records:
                                positions[p] = offset + 1
            except OffsetOutOfRangeError as exc:
                out_of_range += 1
                self.rec.record(process, "invoke", "poll")
                self.rec.record(process, "fail", "poll", error=f"OffsetOutOfRangeError: {exc}")
                if out_of_range >= 10:  # the log really is shorter now: read it again from the start
                    positions = dict.fromkeys(positions, 0)
                    self.rec.record(process, "invoke", "assign", sorted(positions))
                    self.rec.record(process, "ok", "assign", sorted(positions))
                    out_of_range = 0
                await trio.sleep(0.3)
            except (KafkaError, trio.TooSlowError, OSError) as exc:
                log.info("chaos.consumer_error", process=process, error=f"{type(exc).__name__}: {exc}")
                await trio.sleep(0.3)


    async def _group_consumer(self, process: int) -> None:
        c = self.config
        epoch = 0
        rng = random.Random(c.seed * 1009 + process)
        while not self.stop_consuming.is_set():
            leave_at = (trio.current_time() + c.rejoin_interval * rng.uniform(0.5, 1.5)
                        if c.rejoin_interval else float("inf"))
            try:
                async with AsyncConsumer(c.bootstrap, security=c.security, client_id=f"chaos-member-{process}", group_id=c.group_id,
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         session_timeout_ms=c.session_timeout_ms,
                                         max_poll_interval_ms=max(c.session_timeout_ms, 15000),
                                         heartbeat_interval_ms=max(200, c.session_timeout_ms // 6),
                                         fetch_max_wait_ms=300, request_timeout_ms=c.request_timeout_ms) as consumer:

                    def assigned(tps: set[TopicPartition], consumer: AsyncConsumer = consumer) -> None:
                        nonlocal epoch
                        epoch += 1
                        self.rec.record(process, "invoke", "assign")
                        self.rec.record(process, "ok", "assign", {
                            "partitions": sorted(tp.partition for tp in tps), "epoch": epoch,
                            "generation": _generation(consumer)})

                    def revoked(tps: set[TopicPartition]) -> None:
                        self.rec.record(process, "invoke", "revoke")
                        self.rec.record(process, "ok", "revoke",
                                        {"partitions": sorted(tp.partition for tp in tps), "epoch": epoch})

                    consumer.subscribe([c.topic], on_partitions_assigned=assigned, on_partitions_revoked=revoked)
                    while not self.stop_consuming.is_set() and trio.current_time() < leave_at:
                        with trio.fail_after(c.request_timeout_ms / 1000 + c.session_timeout_ms / 1000 + 5):
                            batch = await consumer.poll(timeout_ms=300)
                        records = [(r.partition, r.offset, int(r.value)) for rs in batch.values() for r in rs
                                   if r.value is not None]
                        if records:
                            self.rec.record(process, "invoke", "poll", epoch=epoch)
                            self.rec.record(process, "ok", "poll", records, epoch=epoch)
                            try:
                                await consumer.commit()
                            except KafkaError as exc:  # rebalanced meanwhile: the next owner rereads
                                log.info("chaos.commit_failed", process=process, error=str(exc))
            except (KafkaError, trio.TooSlowError, OSError) as exc:
                log.info("chaos.consumer_error", process=process, error=f"{type(exc).__name__}: {exc}")
                await trio.sleep(0.3)


def _generation(consumer: AsyncConsumer) -> int | None:
    """The member's group generation, for the reader of the history (the checker relies on
    the harness's own epoch instead)."""
    return consumer.generation


async def drain(config: WorkloadConfig, recorder: Recorder, timeout: float = 60.0) -> bool:
    """Read every partition from offset 0 to its end; one `drain` op per partition."""
    tps = [TopicPartition(config.topic, p) for p in range(config.partitions)]
    deadline = trio.current_time() + timeout
    while trio.current_time() < deadline:
        try:
            async with AsyncConsumer(config.bootstrap, security=config.security, client_id="chaos-drain", auto_offset_reset="none",
                                     fetch_max_wait_ms=200, request_timeout_ms=config.request_timeout_ms) as consumer:
                ends = await consumer.end_offsets(tps)
                consumer.assign(tps)
                for tp in tps:
                    consumer.seek(tp, 0)
                got: dict[int, list] = {tp.partition: [] for tp in tps}
                position = {tp.partition: 0 for tp in tps}
                while any(position[tp.partition] < ends[tp] for tp in tps):
                    if trio.current_time() > deadline:
                        raise trio.TooSlowError
                    batch = await consumer.poll(timeout_ms=500)
                    for tp, rs in batch.items():
                        for r in rs:
                            if r.value is not None:
                                got[tp.partition].append((r.partition, r.offset, int(r.value)))
                            position[tp.partition] = r.offset + 1
                for tp in tps:
                    recorder.record("drain", "invoke", "drain", partition=tp.partition)
                    recorder.record("drain", "ok", "drain", got[tp.partition], partition=tp.partition,
                                    offset=ends[tp])
                return True
        except (KafkaError, OSError, trio.TooSlowError) as exc:
            log.info("chaos.drain_retry", error=f"{type(exc).__name__}: {exc}")
            await trio.sleep(1)
    recorder.record("drain", "info", "drain", error=f"could not read every partition to its end in {timeout}s")
    return False
