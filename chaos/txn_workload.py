"""The transactional workload (`raftka chaos run --workload txn`), checked by chaos/txn_checker.py.

Three topics, `<topic>-txn`, `<topic>-in` and `<topic>-out`:

- transactional producers write 1..`max_writes` unique ints to random partitions of the
  txn topic in one transaction, then commit it or (with probability `abort_ratio`) abort
  it; a producer whose outcome is unknown is replaced (a new process id, the same
  transactional id: the new one fences the old);
- an idempotent producer writes inputs to the in topic;
- consume-transform-produce pipelines (a consumer group reading `in` read_committed, each
  with its own transactional producer) copy every input to the same partition of the out
  topic and commit the consumed offsets in the same transaction;
- read_committed readers poll the txn topic.

After the heal the pipelines run until the group's committed offsets reach the end of the
in topic, then every topic is drained read_committed from offset 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from raftka.chaos.workload import Recorder
from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import (
    AbortableTransactionError,
    KafkaError,
    TopicAlreadyExistsError,
)
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition

log = structlog.get_logger("chaos.txn_workload")
ROLES = ("txn", "in", "out")


@dataclass(frozen=True)
class TxnWorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int
    producers: int = 2
    pipelines: int = 2
    readers: int = 1
    rate: float = 10.0  # transactions per second, all producers together
    input_rate: float = 20.0  # inputs per second
    abort_ratio: float = 0.3
    max_writes: int = 4
    seed: int = 0
    request_timeout_ms: int = 4000
    transaction_timeout_ms: int = 10000
    max_block_ms: int = 10000
    group_id: str = "chaos-ctp"
    security: Any = None

    def topic_for(self, role: str) -> str:
        return f"{self.topic}-{role}"


async def create_topics(config: TxnWorkloadConfig, replication_factor: int,
                        topic_config: dict[str, str], timeout: float = 30.0) -> None:
    async with AsyncAdmin(config.bootstrap, security=config.security) as admin:
        for role in ROLES:
            try:
                await admin.create_topics([NewTopic(config.topic_for(role), config.partitions,
                                                    replication_factor, topic_config)])
            except TopicAlreadyExistsError:
                pass
        deadline = trio.current_time() + timeout
        while True:
            try:
                descs = await admin.describe_topics([config.topic_for(r) for r in ROLES])
                if all(len(d.partitions) == config.partitions and all(p.leader >= 0 for p in d.partitions)
                       for d in descs):
                    return
            except KafkaError:
                pass
            if trio.current_time() > deadline:
                raise TimeoutError(f"the txn workload's topics have no leaders after {timeout}s")
            await trio.sleep(0.2)


class TxnWorkload:
    def __init__(self, config: TxnWorkloadConfig, recorder: Recorder) -> None:
        self.config = config
        self.rec = recorder
        self._rng = random.Random(config.seed)
        self._next_value = 0
        self._stride = config.producers + config.pipelines + config.readers + 1
        self.stop_producing = trio.Event()
        self.stop_consuming = trio.Event()

    def _value(self) -> int:
        self._next_value += 1
        return self._next_value

    async def run(self, nursery: trio.Nursery) -> None:
        c = self.config
        for i in range(c.producers):
            nursery.start_soon(self._producer, i)
        nursery.start_soon(self._inputs, c.producers)
        for i in range(c.pipelines):
            nursery.start_soon(self._pipeline, c.producers + 1 + i)
        for i in range(c.readers):
            nursery.start_soon(self._reader, c.producers + 1 + c.pipelines + i)

    def _txn_producer(self, transactional_id: str) -> AsyncProducer:
        c = self.config
        return AsyncProducer(c.bootstrap, security=c.security, client_id=transactional_id,
                             transactional_id=transactional_id, linger_ms=0,
                             transaction_timeout_ms=c.transaction_timeout_ms,
                             max_block_ms=c.max_block_ms, request_timeout_ms=c.request_timeout_ms,
                             delivery_timeout_ms=c.max_block_ms, metadata_timeout_ms=c.max_block_ms)

    # --- transactional producers ----------------------------------------------------
    async def _producer(self, process: int) -> None:
        c = self.config
        transactional_id = f"chaos-txn-{process}"
        while not self.stop_producing.is_set():
            try:
                async with self._txn_producer(transactional_id) as producer:
                    with trio.fail_after(c.max_block_ms / 1000 + 5):
                        await producer.init_transactions()
                    process = await self._txn_loop(producer, process)
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                log.info("chaos.txn_producer_restart", process=process, error=str(exc))
                await trio.sleep(0.5)

    async def _txn_loop(self, producer: AsyncProducer, process: int) -> int:
        c = self.config
        topic = c.topic_for("txn")
        while not self.stop_producing.is_set():
            await trio.sleep(self._rng.expovariate(c.rate / c.producers))
            writes = [(self._rng.randrange(c.partitions), self._value())
                      for _ in range(self._rng.randint(1, c.max_writes))]
            intent = "abort" if self._rng.random() < c.abort_ratio else "commit"
            value = {"writes": [list(w) for w in writes], "intent": intent}
            self.rec.record(process, "invoke", "txn", value)
            try:
                with trio.fail_after(2 * c.max_block_ms / 1000 + 5):
                    outcome = await self._one_txn(producer, topic, writes, intent)
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                # An abort never commits: the coordinator aborts what nobody commits.
                outcome = "fail" if intent == "abort" else "info"
                self.rec.record(process, outcome, "txn", value, error=f"{type(exc).__name__}: {exc}")
                return process + self._stride
            self.rec.record(process, outcome, "txn", value)
        return process

    @staticmethod
    async def _one_txn(producer: AsyncProducer, topic: str, writes: Iterable[tuple[int, int]],
                       intent: str) -> str:
        producer.begin_transaction()
        try:
            for partition, v in writes:
                producer.send_nowait(topic, str(v).encode(), partition=partition)
            if intent == "commit":
                await producer.commit_transaction()
                return "ok"
            await producer.flush()  # the aborted records reach the log: read_committed readers must skip them
        except AbortableTransactionError:
            await producer.abort_transaction()
            return "fail"
        await producer.abort_transaction()
        return "ok"

    # --- inputs and pipelines --------------------------------------------------------
    async def _inputs(self, process: int) -> None:
        c = self.config
        topic = c.topic_for("in")
        while not self.stop_producing.is_set():
            try:
                async with AsyncProducer(c.bootstrap, security=c.security, client_id="chaos-inputs",
                                         enable_idempotence=True, linger_ms=0,
                                         request_timeout_ms=c.request_timeout_ms,
                                         delivery_timeout_ms=c.max_block_ms) as producer:
                    while not self.stop_producing.is_set():
                        await trio.sleep(1 / c.input_rate)
                        v = self._value()
                        partition = self._rng.randrange(c.partitions)
                        self.rec.record(process, "invoke", "send", v, partition)
                        try:
                            meta = await producer.send(topic, str(v).encode(), partition=partition)
                        except KafkaError as exc:
                            self.rec.record(process, "info", "send", v, partition, error=str(exc))
                            process += self._stride
                            break
                        self.rec.record(process, "ok", "send", v, meta.partition, meta.offset)
            except (KafkaError, OSError) as exc:
                log.info("chaos.input_producer_restart", error=str(exc))
                await trio.sleep(0.5)

    async def _pipeline(self, process: int) -> None:
        c = self.config
        transactional_id = f"chaos-ctp-{process}"
        while not self.stop_consuming.is_set():
            try:
                async with AsyncConsumer(
                        c.bootstrap, security=c.security, client_id=f"chaos-ctp-{process}",
                        group_id=c.group_id, isolation_level="read_committed",
                        auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=6000, heartbeat_interval_ms=1000,
                        fetch_max_wait_ms=300, request_timeout_ms=c.request_timeout_ms) as consumer, \
                        self._txn_producer(transactional_id) as producer:
                    with trio.fail_after(c.max_block_ms / 1000 + 5):
                        await producer.init_transactions()
                    consumer.subscribe([c.topic_for("in")])
                    process = await self._pipeline_loop(consumer, producer, process)
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                log.info("chaos.pipeline_restart", process=process, error=f"{type(exc).__name__}: {exc}")
                process += self._stride
                await trio.sleep(0.5)

    async def _pipeline_loop(self, consumer: AsyncConsumer, producer: AsyncProducer,
                             process: int) -> int:
        c = self.config
        out = c.topic_for("out")
        while not self.stop_consuming.is_set():
            with trio.fail_after(c.max_block_ms / 1000 + 10):
                batch = await consumer.poll(timeout_ms=300, max_records=20)
            inputs = [(r.partition, r.offset, int(r.value)) for rs in batch.values() for r in rs
                      if r.value is not None]
            if not batch:
                continue
            offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
            value = {"inputs": [list(i) for i in inputs], "writes": [[p, v] for p, _, v in inputs]}
            self.rec.record(process, "invoke", "ctp", value)
            try:
                with trio.fail_after(2 * c.max_block_ms / 1000 + 5):
                    producer.begin_transaction()
                    for p, _, v in inputs:
                        producer.send_nowait(out, str(v).encode(), partition=p)
                    await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                    await producer.commit_transaction()
            except AbortableTransactionError as exc:
                try:
                    with trio.fail_after(c.max_block_ms / 1000 + 5):
                        await producer.abort_transaction()
                except (KafkaError, trio.TooSlowError) as exc2:
                    self.rec.record(process, "info", "ctp", value, error=str(exc2))
                    raise
                self.rec.record(process, "fail", "ctp", value, error=str(exc))
                for tp in offsets:  # read the inputs again from what is committed
                    committed = await consumer.committed(tp)
                    consumer.seek(tp, committed if committed is not None else 0)
                continue
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                self.rec.record(process, "info", "ctp", value, error=f"{type(exc).__name__}: {exc}")
                raise
            self.rec.record(process, "ok", "ctp", value)
        return process

    async def caught_up(self, timeout: float) -> bool:
        """Wait until the pipelines' group has committed the end of every input partition."""
        c = self.config
        tps = [TopicPartition(c.topic_for("in"), p) for p in range(c.partitions)]
        deadline = trio.current_time() + timeout
        while trio.current_time() < deadline:
            try:
                async with AsyncConsumer(c.bootstrap, security=c.security, group_id=c.group_id,
                                         isolation_level="read_committed",
                                         request_timeout_ms=c.request_timeout_ms) as probe:
                    ends = await probe.end_offsets(tps)
                    while trio.current_time() < deadline:
                        committed = [await probe.committed(tp) for tp in tps]
                        if all(done is not None and done >= ends[tp]
                               for tp, done in zip(tps, committed, strict=True)):
                            return True
                        await trio.sleep(0.5)
            except KafkaError as exc:
                log.info("chaos.caught_up_retry", error=str(exc))
                await trio.sleep(0.5)
        return False

    # --- readers --------------------------------------------------------------------
    async def _reader(self, process: int) -> None:
        c = self.config
        topic = c.topic_for("txn")
        positions = {p: 0 for p in range(c.partitions)}
        while not self.stop_consuming.is_set():
            try:
                async with AsyncConsumer(c.bootstrap, security=c.security, client_id="chaos-reader",
                                         isolation_level="read_committed", auto_offset_reset="none",
                                         fetch_max_wait_ms=300,
                                         request_timeout_ms=c.request_timeout_ms) as consumer:
                    consumer.assign([TopicPartition(topic, p) for p in positions])
                    for p, offset in positions.items():
                        consumer.seek(TopicPartition(topic, p), offset)
                    while not self.stop_consuming.is_set():
                        with trio.fail_after(c.request_timeout_ms / 1000 + 5):
                            batch = await consumer.poll(timeout_ms=300)
                        records = [(r.partition, r.offset, int(r.value)) for rs in batch.values()
                                   for r in rs if r.value is not None]
                        if records:
                            self.rec.record(process, "invoke", "txn-poll")
                            self.rec.record(process, "ok", "txn-poll",
                                            {"topic": "txn", "records": [list(r) for r in records]})
                            for p, offset, _ in records:
                                positions[p] = offset + 1
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                log.info("chaos.reader_error", process=process, error=f"{type(exc).__name__}: {exc}")
                await trio.sleep(0.3)


async def drain_txn(config: TxnWorkloadConfig, recorder: Recorder, timeout: float = 60.0) -> bool:
    """Read each topic read_committed from offset 0 to its last stable offset; one
    `txn-drain` op per topic."""
    deadline = trio.current_time() + timeout
    done: set[str] = set()
    while trio.current_time() < deadline and len(done) < len(ROLES):
        for role in ROLES:
            if role in done:
                continue
            tps = [TopicPartition(config.topic_for(role), p) for p in range(config.partitions)]
            try:
                records = await _drain_topic(config, tps, deadline)
            except (KafkaError, OSError, trio.TooSlowError) as exc:
                log.info("chaos.drain_retry", topic=role, error=f"{type(exc).__name__}: {exc}")
                await trio.sleep(1)
                continue
            recorder.record("drain", "invoke", "txn-drain", {"topic": role})
            recorder.record("drain", "ok", "txn-drain", {"topic": role, "records": records})
            done.add(role)
    if len(done) < len(ROLES):
        recorder.record("drain", "info", "txn-drain", {"topics": sorted(set(ROLES) - done)},
                        error=f"could not read every topic to its end in {timeout}s")
        return False
    return True


async def _drain_topic(config: TxnWorkloadConfig, tps: list[TopicPartition],
                       deadline: float) -> list[list[int]]:
    async with AsyncConsumer(config.bootstrap, security=config.security, client_id="chaos-drain",
                             isolation_level="read_committed", auto_offset_reset="none",
                             fetch_max_wait_ms=200,
                             request_timeout_ms=config.request_timeout_ms) as consumer:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[list[int]] = []
        while True:
            # The position passes markers too, so it reaches the last stable offset.
            behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not behind:
                return got
            if trio.current_time() > deadline:
                raise trio.TooSlowError
            batch = await consumer.poll(timeout_ms=500)
            for rs in batch.values():
                got += [[r.partition, r.offset, int(r.value)] for r in rs if r.value is not None]
