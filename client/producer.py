"""AsyncProducer: batching, partitioning, retries and idempotence on trio.

    async with AsyncProducer("127.0.0.1:9092", acks="all") as producer:
        meta = await producer.send("events", b"v", key=b"k")      # waits for the ack
        fut = producer.send_nowait("events", b"w")                # returns at once
        fut.add_callback(lambda meta, exc: ...)
        await producer.flush()

The pure parts live in `accumulator.py` (batching, sticky partitioner,
sequence numbers). This module is the shell: one sender task drains ready
batches, groups them by leader and sends one ProduceRequest per broker (at
most `max_in_flight_requests_per_connection` at a time per broker).

Ordering: a partition never has more than one batch in flight, whatever
`max_in_flight_requests_per_connection` says (that limit applies across
partitions of one broker). So a retried batch can never be overtaken by a
later one, with or without idempotence; the price is no per-partition
pipelining. With idempotence a retry resends the batch with its original
sequence number, so the broker drops a duplicate of a write that did land.

Transactions (`transactional_id`, KIP-98): the state machine is
`transactions.TransactionManager`, the coordinator requests are
`transactional.TxnCoordinatorClient`; here the sender holds a batch back until
AddPartitionsToTxn has added its partition, marks batches transactional, and a
failed batch makes the transaction abortable (or the producer fenced).

    async with AsyncProducer(servers, transactional_id="etl-1") as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        producer.send_nowait("out", b"v")
        await producer.send_offsets_to_transaction({tp: offset}, consumer.group_metadata())
        await producer.commit_transaction()      # AbortableTransactionError -> abort_transaction()
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio

from raftka.client.accumulator import (
    ProducerBatch,
    RecordAccumulator,
    SequenceNumbers,
    StickyPartitioner,
    estimate_record_size,
)
from raftka.client.bootstrap import parse_bootstrap
from raftka.client.cluster import Cluster
from raftka.client.errors import (
    AbortableTransactionError,
    FatalTransactionError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)
from raftka.client.lifecycle import OwnedNursery
from raftka.client.log_throttle import RepeatThrottle
from raftka.client.protocol import ApiKey, ErrorCode, InitProducerIdRequest, ProduceRequest
from raftka.client.records import ConsumerGroupMetadata, RecordMetadata, TopicPartition
from raftka.client.sdk_log import get_logger
from raftka.client.security import ClientSecurity
from raftka.client.transactional import TxnCoordinatorClient
from raftka.client.transactions import TransactionManager, TxnApi, TxnState
from raftka.client.versions import min_version_check
from raftka.log.compression import Compression
from raftka.log.record_batch import encode_batch

log = get_logger("raftka.client.producer")

Callback = Callable[[RecordMetadata | None, BaseException | None], Any]


# A tuple, not `bytes | bytearray | memoryview`: that builds a new union object per call.
_BYTES_LIKE = (bytes, bytearray, memoryview)


class OutgoingRecord:
    """A record waiting in the producer: the fields `encode_batch` reads. A plain
    slotted class, not log's frozen Record: one is made per record sent, and a
    frozen dataclass pays an object.__setattr__ per field."""

    __slots__ = ("key", "value", "headers", "timestamp")
    offset = None  # always base_offset + index

    def __init__(self, key: bytes | None, value: bytes | None,
                 headers: tuple[tuple[str, bytes | None], ...], timestamp: int) -> None:
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp


def _now_ms() -> float:
    return trio.current_time() * 1000


class DeliveryFuture:
    """The outcome of one `send_nowait`: `await fut` (or `await fut.wait()`)
    returns RecordMetadata or raises the delivery error; `add_callback(fn)`
    calls `fn(metadata, exception)` once it is known (immediately if it is)."""

    __slots__ = ("_done", "_event", "_result", "_error", "_callbacks", "topic",
                 "record_timestamp")

    def __init__(self, topic: str, record_timestamp: int) -> None:
        # One future per record: the trio.Event and the callback list are made
        # only when somebody waits or registers, which most records never see.
        self._done = False
        self._event: trio.Event | None = None
        self._result: RecordMetadata | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callback] | None = None
        self.topic = topic
        self.record_timestamp = record_timestamp

    def done(self) -> bool:
        return self._done

    def result(self) -> RecordMetadata:
        """The metadata if delivered; raises the error if failed, or
        IllegalStateError when not done yet."""
        if not self._done:
            raise IllegalStateError("the record is not delivered yet")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def exception(self) -> BaseException | None:
        return self._error

    async def wait(self) -> RecordMetadata:
        if not self._done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        return self.result()

    def __await__(self) -> Any:
        return self.wait().__await__()

    def add_callback(self, fn: Callback) -> None:
        if self._done:
            self._call(fn)
        elif self._callbacks is None:
            self._callbacks = [fn]
        else:
            self._callbacks.append(fn)

    def _call(self, fn: Callback) -> None:
        try:
            fn(self._result, self._error)
        except Exception:  # a user's callback must not kill the sender
            log.exception("producer.callback_failed", topic=self.topic)

    def _finish(self, result: RecordMetadata | None, error: BaseException | None) -> None:
        if self._done:
            return
        self._result, self._error = result, error
        self._done = True
        if self._event is not None:
            self._event.set()
        if self._callbacks is not None:
            for fn in self._callbacks:
                self._call(fn)
            self._callbacks = None


def _acks(value: int | str) -> int:
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise ValueError(f"acks must be 0, 1, -1 or 'all', got {value!r}")


class AsyncProducer:
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        *,
        client_id: str = "raftka-producer",
        acks: int | str | None = None,
        batch_size: int = 16384,
        linger_ms: float = 5,
        compression_type: str | None = None,
        retries: int = 2147483647,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        metadata_timeout_ms: int | None = None,
        enable_idempotence: bool = False,
        max_in_flight_requests_per_connection: int = 5,
        partitioner: Callable[[str, bytes | None, Sequence[int], Sequence[int]], int] | None = None,
        security: ClientSecurity | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        max_block_ms: int = 60000,
    ) -> None:
        self.security = security
        if transactional_id is not None:
            enable_idempotence = True  # a transactional producer is idempotent, as in Kafka
        # Kafka's default is acks=all once idempotence is on; 1 otherwise (this SDK's default).
        self.acks = _acks(acks if acks is not None else ("all" if enable_idempotence else 1))
        if transactional_id is not None and self.acks != -1:
            raise ValueError(f"transactional_id needs acks='all', got acks={acks!r}")
        self._txn = TransactionManager(transactional_id, transaction_timeout_ms) \
            if transactional_id is not None else None
        self.transactional_id = transactional_id
        self.max_block_ms = max_block_ms
        self._txn_client: TxnCoordinatorClient | None = None
        if enable_idempotence and self.acks != -1:
            raise ValueError(f"enable_idempotence needs acks='all', got acks={acks!r}")
        if enable_idempotence and max_in_flight_requests_per_connection > 5:
            raise ValueError(
                "enable_idempotence allows at most 5 in-flight requests per connection, "
                f"got {max_in_flight_requests_per_connection}")
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be >= 1, got "
                             f"{max_in_flight_requests_per_connection}")
        self.compression = Compression.from_name(compression_type or "none")
        parse_bootstrap(bootstrap_servers)  # a bad address is a ValueError here, not in start()
        self._bootstrap = bootstrap_servers
        self._client_id = client_id
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        # How long a record waits for its topic's metadata (Kafka: max.block.ms, in send()).
        self.metadata_timeout_ms = max_block_ms if metadata_timeout_ms is None else metadata_timeout_ms
        self.enable_idempotence = enable_idempotence
        self.max_in_flight = max_in_flight_requests_per_connection
        self._accumulator = RecordAccumulator(batch_size, linger_ms)
        self._sticky = StickyPartitioner()
        self._partitioner = partitioner or self._sticky.partition
        self._sequences = SequenceNumbers()
        self._retry_log = RepeatThrottle()  # producer.retry: one line per 5 s per partition and error
        # Records whose topic metadata is not known yet: (topic, partition, record, future, deadline)
        self._unpartitioned: list[tuple[str, int | None, OutgoingRecord, DeliveryFuture, float]] = []
        self._limits: dict[int, trio.Semaphore] = {}
        self._wake = trio.Event()
        self._progress = trio.Event()  # set whenever a batch finishes
        self._owner = OwnedNursery()
        self._nursery: trio.Nursery | None = None
        self._cluster: Cluster | None = None
        self._closed = False
        self._refresh_error: KafkaError | None = None  # the last metadata refresh's, if it failed
        self._partitions_meta: Any = None  # the metadata snapshot _partitions_cache is for
        self._partitions_cache: dict[str, tuple[list[int], list[int], dict[int, TopicPartition]]] = {}

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        """Open the producer. `start` and `close` must run in the same task
        (`async with` does that). A cluster that is down is not an error here, as for Kafka's
        producer: records wait for their topic's metadata up to `max_block_ms` (or
        `metadata_timeout_ms`), then fail with KafkaTimeoutError."""
        if self._nursery is not None:
            return
        self._nursery = await self._owner.enter()
        self._cluster = Cluster(
            self._bootstrap, self._nursery, client_id=self._client_id,
            request_timeout_ms=self.request_timeout_ms, retry_backoff_ms=self.retry_backoff_ms,
            allow_auto_topic_creation=True, security=self.security)
        try:
            await self._cluster.bootstrap_if_reachable()
        except BaseException:
            await self._abort_start()
            raise
        if self._txn is not None:
            self._txn_client = TxnCoordinatorClient(
                self._cluster, self._txn, retry_backoff_ms=self.retry_backoff_ms,
                max_block_ms=self.max_block_ms)
        self._nursery.start_soon(self._sender)

    async def _abort_start(self) -> None:
        assert self._nursery is not None and self._cluster is not None
        await self._shutdown()

    async def _shutdown(self) -> None:
        """Close the connections and the nursery; completes even under cancellation."""
        assert self._nursery is not None and self._cluster is not None
        self._nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await self._cluster.aclose()
        await self._owner.exit()
        self._nursery = None

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (waiting at most `timeout` s; None = the
        delivery timeout), then stop. Records still undelivered fail with
        KafkaTimeoutError."""
        if self._nursery is None or self._closed:
            return
        self._closed = True
        try:
            with trio.move_on_after(self.delivery_timeout_ms / 1000 if timeout is None else timeout):
                await self.flush()
        finally:
            for batch in self._accumulator.abort_all():
                self._fail_batch(batch, KafkaTimeoutError("producer closed before delivery"),
                                 muted=False)
            for _, _, _, fut, _ in self._unpartitioned:
                fut._finish(None, KafkaTimeoutError("producer closed before the topic was known"))
            self._unpartitioned.clear()
            await self._shutdown()

    # --- sending ---------------------------------------------------------
    def send_nowait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None,
                    partition: int | None = None, timestamp_ms: int | None = None,
                    ) -> DeliveryFuture:
        """Queue one record and return its DeliveryFuture at once."""
        if self._nursery is None or self._closed:
            raise IllegalStateError("the producer is not started or already closed")
        if self._txn is not None:
            self._txn.require_in_transaction("send")
        if value is not None and type(value) is not bytes:
            if not isinstance(value, _BYTES_LIKE):
                raise TypeError(f"value must be bytes or None, got {type(value).__name__}")
            value = bytes(value)
        if key is not None and type(key) is not bytes:
            if not isinstance(key, _BYTES_LIKE):
                raise TypeError(f"key must be bytes or None, got {type(key).__name__}")
            key = bytes(key)
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        record = OutgoingRecord(key, value, () if not headers else tuple(
            (str(k), None if v is None else bytes(v)) for k, v in headers), ts)
        fut = DeliveryFuture(topic, ts)
        if not self._place(topic, partition, record, fut):
            deadline = _now_ms() + self.metadata_timeout_ms
            self._unpartitioned.append((topic, partition, record, fut, deadline))
            assert self._cluster is not None
            self._cluster.topics.add(topic)
            self._wake.set()
        return fut

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   ) -> RecordMetadata:
        """Send one record and wait until it is acknowledged (per `acks`)."""
        return await self.send_nowait(topic, value, key, headers, partition, timestamp_ms)

    async def flush(self) -> None:
        """Wait until every record sent so far is delivered or failed."""
        self._accumulator.begin_flush()
        try:
            self._wake.set()
            while self._unpartitioned or self._accumulator.has_unsent() \
                    or self._accumulator.in_flight():
                self._progress = trio.Event()
                self._wake.set()
                with trio.move_on_after(0.05):
                    await self._progress.wait()
        finally:
            self._accumulator.end_flush()

    # --- transactions (KIP-98) ------------------------------------------------------
    def _require_txn(self) -> tuple[TransactionManager, TxnCoordinatorClient]:
        if self._txn is None:
            raise IllegalStateError("transactions need a producer made with transactional_id")
        if self._txn_client is None or self._closed:
            raise IllegalStateError("the producer is not started or already closed")
        return self._txn, self._txn_client

    @property
    def transaction_state(self) -> TxnState | None:
        """The transaction state (None for a non-transactional producer)."""
        return None if self._txn is None else self._txn.state

    async def init_transactions(self) -> None:
        """Register the transactional id with its coordinator: fences any older producer
        with the same id and completes (aborts) its open transaction. Call once, first.
        Raises FatalTransactionError (fenced, not authorized) or KafkaTimeoutError after
        `max_block_ms` (then it may be called again)."""
        txn, client = self._require_txn()
        if txn.state is not TxnState.INITIALIZING:
            txn.begin_init()
        await self._init_pid(client)

    async def _init_pid(self, client: TxnCoordinatorClient) -> None:
        pid, epoch = await client.init_producer_id()
        assert self._txn is not None
        self._txn.on_init_producer_id(pid, epoch)
        # Sequences restart at 0 for a new (pid, epoch), across every partition.
        self._sequences.set_producer(pid, epoch)

    def begin_transaction(self) -> None:
        """Start a transaction (nothing is sent until the first record or offsets)."""
        txn, _ = self._require_txn()
        txn.begin()

    async def send_offsets_to_transaction(
            self, offsets: dict[TopicPartition, Any],
            group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit a consumer's offsets as part of this transaction (consume-transform-
        produce): AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator with the
        member's generation and id (KIP-447). `offsets` maps partitions to the next offset
        to consume (an int or an OffsetAndMetadata); `group_metadata` is the consumer's
        `group_metadata()` (a bare group id skips the generation check)."""
        txn, client = self._require_txn()
        txn.require_in_transaction("send_offsets_to_transaction")
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not offsets:
            return
        entries: dict[TopicPartition, tuple[int, str, int]] = {}
        for tp, value in offsets.items():
            if isinstance(value, int):
                entries[TopicPartition(*tp)] = (value, "", -1)
            else:
                entries[TopicPartition(*tp)] = (value.offset, value.metadata, value.leader_epoch)
        await client.add_offsets(group_metadata.group_id)
        await client.txn_offset_commit(entries, group_metadata)

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it. Raises
        AbortableTransactionError (call abort_transaction), FatalTransactionError (close the
        producer) or KafkaTimeoutError (call commit_transaction again)."""
        txn, client = self._require_txn()
        if txn.state is not TxnState.COMMITTING:
            txn.require_in_transaction("commit_transaction")
            await self.flush()
        if txn.begin_commit():
            await client.end_txn(commit=True)
            txn.on_end_txn_done()

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not yet sent fail, records in flight are waited
        for, then the coordinator writes ABORT markers (read_committed consumers never see
        the records). After an error that needs it, the epoch is bumped instead (KIP-360).
        Raises FatalTransactionError or KafkaTimeoutError (call it again)."""
        txn, client = self._require_txn()
        if txn.state is TxnState.FATAL_ERROR:
            assert txn.error is not None
            raise txn.error
        if txn.state is TxnState.INITIALIZING and txn.needs_bump:  # a retried epoch bump
            await self._init_pid(client)
            return
        if txn.state is not TxnState.ABORTING:
            aborted = AbortableTransactionError(
                f"transactional id {self.transactional_id!r}: the transaction was aborted")
            for batch in self._accumulator.abort_all():
                self._fail_batch(batch, aborted, muted=False)
            for _, _, _, fut, _ in self._unpartitioned:
                fut._finish(None, aborted)
            self._unpartitioned.clear()
            txn.pending.clear()
            await self.flush()  # waits for the batches in flight
        send_end = txn.begin_abort()
        if txn.abort_needs_init:
            txn.begin_init()
            await self._init_pid(client)
        elif send_end:
            await client.end_txn(commit=False)
            txn.on_end_txn_done()

    async def partitions_for(self, topic: str) -> list[int]:
        assert self._cluster is not None
        return await self._cluster.wait_for_partitions(topic, self.metadata_timeout_ms / 1000)

    def _place(self, topic: str, partition: int | None, record: OutgoingRecord,
               fut: DeliveryFuture) -> bool:
        """Append to the accumulator if the topic's partitions are known."""
        known = self._partitions(topic)
        if known is None:
            return False
        parts, available, tps = known
        if partition is None:
            partition = self._partitioner(topic, record.key, parts, available)
        elif partition not in parts:
            fut._finish(None, error_for_code(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic {topic!r} does not exist "
                f"(partitions: 0..{len(parts) - 1})"))
            return True
        tp = tps.get(partition) or TopicPartition(topic, partition)
        size = estimate_record_size(record.key, record.value, record.headers)
        result = self._accumulator.append(tp, record, fut, _now_ms(), size)
        if result.batch_full:
            self._sticky.batch_completed(topic, partition, available)
        if result.batch_full or result.new_batch:
            # A new batch sets a linger deadline the sender must learn about.
            self._wake.set()
        return True

    def _partitions(self, topic: str
                    ) -> tuple[list[int], list[int], dict[int, TopicPartition]] | None:
        """(all, available) partitions of `topic` and a TopicPartition for each,
        or None while the topic is unknown.

        Computed once per metadata snapshot (an immutable object replaced on
        each refresh), not once per record: both lists are sorted copies."""
        assert self._cluster is not None
        meta = self._cluster.metadata
        if meta is not self._partitions_meta:
            self._partitions_meta = meta
            self._partitions_cache = {}
        known = self._partitions_cache.get(topic)
        if known is None:
            parts = meta.partitions_for(topic)
            if not parts:
                return None
            known = self._partitions_cache[topic] = (
                parts, meta.available_partitions_for(topic),
                {p: TopicPartition(topic, p) for p in parts})
        return known

    # --- the sender task -------------------------------------------------
    async def _sender(self) -> None:
        assert self._cluster is not None
        while True:
            self._wake = trio.Event()
            if self._unpartitioned:
                await self._resolve_unpartitioned()
            if self.enable_idempotence and self._txn is None \
                    and not self._sequences.initialized and self._accumulator.has_unsent():
                await self._init_producer_id()
            now = _now_ms()
            ready, next_ms = self._accumulator.ready(now)
            by_node: dict[int, list[ProducerBatch]] = {}
            need_refresh = False
            txn = self._txn
            for tp in ready:
                if txn is not None and not txn.add_partition(tp):
                    continue  # held back until AddPartitionsToTxn added it
                leader = self._cluster.metadata.leader_for(tp)
                if leader is None:
                    need_refresh = True
                    continue
                batch = self._accumulator.drain(tp)
                self._sticky.batch_completed(
                    tp.topic, tp.partition, self._cluster.metadata.available_partitions_for(tp.topic))
                by_node.setdefault(leader, []).append(batch)
            for node_id, batches in by_node.items():
                limit = self._limits.setdefault(node_id, trio.Semaphore(self.max_in_flight))
                await limit.acquire()
                assert self._nursery is not None
                self._nursery.start_soon(self._send_batches, node_id, batches, limit)
            if txn is not None and txn.pending:
                await self._add_partitions()
                continue
            if need_refresh:
                await self._refresh_quietly()
                next_ms = min(math.inf if next_ms is None else next_ms, _now_ms() + self.retry_backoff_ms)
            self._expire(now)
            if ready and not need_refresh:
                continue
            timeout = None if next_ms is None else max(0.0, (next_ms - _now_ms()) / 1000)
            if self._unpartitioned:
                timeout = min(timeout if timeout is not None else 1e9,
                              self.retry_backoff_ms / 1000)
            with trio.move_on_after(1e9 if timeout is None else timeout):
                await self._wake.wait()

    async def _add_partitions(self) -> None:
        """AddPartitionsToTxn for the partitions waiting to join the transaction; on an
        abortable or fatal error (or outside a transaction) every queued batch fails."""
        txn, client = self._txn, self._txn_client
        assert txn is not None and client is not None
        try:
            if txn.state is not TxnState.IN_TRANSACTION:
                raise txn.error or IllegalStateError(
                    f"transactional id {self.transactional_id!r}: records queued in state "
                    f"{txn.state.value}, outside a transaction")
            await client.add_partitions(set(txn.pending))
        except KafkaError as exc:
            if txn.state is TxnState.IN_TRANSACTION:  # a timeout or connection failure
                txn.fail(exc, fatal=False, api=TxnApi.ADD_PARTITIONS)
            txn.pending.clear()
            for batch in self._accumulator.abort_all():
                self._fail_batch(batch, txn.error or exc, muted=False)
            self._progress.set()

    async def _refresh_quietly(self) -> None:
        assert self._cluster is not None
        try:
            await self._cluster.refresh_metadata()
            self._refresh_error = None
        except KafkaError as exc:
            self._refresh_error = exc
            log.info("producer.metadata_refresh_failed", error=str(exc))

    async def _resolve_unpartitioned(self) -> None:
        await self._refresh_quietly()
        waiting, self._unpartitioned = self._unpartitioned, []
        now = _now_ms()
        for topic, partition, record, fut, deadline in waiting:
            if self._place(topic, partition, record, fut):
                continue
            if now >= deadline:
                assert self._cluster is not None
                code = self._cluster.metadata.topic_errors.get(topic)
                why = f"topic {topic!r} not in metadata after {self.metadata_timeout_ms} ms (max_block_ms)"
                if not code and self._refresh_error is not None:
                    why += f"; the last metadata request failed: {self._refresh_error}"
                fut._finish(None, error_for_code(code, why) if code else KafkaTimeoutError(why))
            else:
                self._unpartitioned.append((topic, partition, record, fut, deadline))
        self._progress.set()

    async def _init_producer_id(self) -> None:
        assert self._cluster is not None
        while True:
            try:
                response = await self._cluster.send_any(
                    ApiKey.INIT_PRODUCER_ID,
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
                if response.error_code == 0:
                    self._sequences.set_producer(response.producer_id, response.producer_epoch)
                    for batch in self._accumulator.pending_batches():
                        batch.base_sequence, batch.encoded = -1, None
                    log.debug("producer.init_producer_id", producer_id=response.producer_id,
                              epoch=response.producer_epoch)
                    return
                error: KafkaError = error_for_code(response.error_code, "InitProducerId")
            except KafkaError as exc:
                error = exc
            if not error.retriable:
                for batch in self._accumulator.abort_all():
                    self._fail_batch(batch, error, muted=False)
                return
            log.info("producer.init_producer_id_retry", error=str(error))
            await trio.sleep(self.retry_backoff_ms / 1000)

    def _expire(self, now: float) -> None:
        """Fail queued batches older than the delivery timeout."""
        cutoff = now - self.delivery_timeout_ms
        for batch in self._accumulator.expire_older_than(cutoff):
            self._fail_batch(batch, KafkaTimeoutError(
                f"{len(batch)} record(s) for {batch.tp.topic}/{batch.tp.partition} expired "
                f"after {self.delivery_timeout_ms} ms waiting to be sent"), muted=False)

    def _encode(self, batch: ProducerBatch) -> bytes:
        if batch.encoded is None:
            if self.enable_idempotence:
                self._sequences.assign(batch)
            batch.encoded = encode_batch(
                batch.records,
                compression=int(self.compression),
                producer_id=self._sequences.producer_id if self.enable_idempotence else -1,
                producer_epoch=self._sequences.producer_epoch if self.enable_idempotence else -1,
                base_sequence=batch.base_sequence if self.enable_idempotence else -1,
                transactional=self._txn is not None,
            )
        return batch.encoded

    async def _send_batches(self, node_id: int, batches: list[ProducerBatch],
                            limit: trio.Semaphore) -> None:
        assert self._cluster is not None
        try:
            topics: dict[str, list[dict[str, Any]]] = {}
            for batch in list(batches):
                batch.attempts += 1
                try:
                    records = self._encode(batch)
                except ValueError as exc:  # e.g. a header the format cannot hold
                    self._fail_batch(batch, exc)
                    batches.remove(batch)
                    continue
                topics.setdefault(batch.tp.topic, []).append(
                    {"index": batch.tp.partition, "records": records})
            if not batches:
                return
            request = ProduceRequest(
                transactional_id=self.transactional_id, acks=self.acks, timeout_ms=self.request_timeout_ms,
                topic_data=[{"name": t, "partition_data": p} for t, p in topics.items()])
            try:
                conn = await self._cluster.connection(node_id)
                version = conn.version(ApiKey.PRODUCE)
                if self.compression == Compression.ZSTD:
                    version = min_version_check(conn.versions, ApiKey.PRODUCE, 7, "zstd")
                response = await conn.request(ApiKey.PRODUCE, request, version=version,
                                              expect_response=self.acks != 0)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                for batch in batches:
                    self._retry_or_fail(batch, exc, refresh=True)
                await self._refresh_quietly()
                return
            except (KafkaError, ValueError) as exc:
                # Not retriable: an unsupported version, or a record the codec
                # cannot encode (EncodeError is a ValueError).
                for batch in batches:
                    self._fail_batch(batch, exc)
                return
            if response is None:  # acks=0
                for batch in batches:
                    self._complete_batch(batch, -1, -1)
                return
            answers = {(t.name, p.index): p for t in response.responses
                       for p in t.partition_responses}
            refresh = False
            for batch in batches:
                answer = answers.get((batch.tp.topic, batch.tp.partition))
                if answer is None:
                    self._retry_or_fail(batch, KafkaConnectionError(
                        f"the produce response has no entry for {batch.tp}"), refresh=False)
                    continue
                code = answer.error_code
                if code in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._complete_batch(batch, answer.base_offset, answer.log_append_time_ms)
                    continue
                error = error_for_code(code, f"producing to {batch.tp.topic}/{batch.tp.partition}"
                                       + (f": {answer.error_message}"
                                          if getattr(answer, "error_message", None) else ""))
                if error.invalid_metadata:
                    refresh = True
                    self._cluster.mark_leader_unknown([batch.tp])
                if code in (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER) \
                        and self._txn is None:
                    # The broker lost or disagrees with our sequence state: start a
                    # new producer id; this batch fails (it may or may not be written).
                    self._sequences.reset()
                self._retry_or_fail(batch, error, refresh=error.invalid_metadata)
            if refresh:
                await self._refresh_quietly()
        finally:
            limit.release()
            self._progress.set()
            self._wake.set()

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError, *, refresh: bool) -> None:
        now = _now_ms()
        expired = now - batch.created_ms > self.delivery_timeout_ms
        if error.retriable and batch.attempts <= self.retries and not expired:
            folded = self._retry_log.admit((batch.tp, type(error)), now)
            if folded is not None:
                log.info("producer.retry", topic=batch.tp.topic, partition=batch.tp.partition,
                         attempt=batch.attempts, error=str(error),
                         **({"repeated": folded} if folded else {}))
            self._accumulator.reenqueue(batch, now + self.retry_backoff_ms)
            return
        if expired and error.retriable:
            error = KafkaTimeoutError(
                f"{len(batch)} record(s) for {batch.tp.topic}/{batch.tp.partition} expired after "
                f"{self.delivery_timeout_ms} ms (last error: {error})")
        self._fail_batch(batch, error)

    def _complete_batch(self, batch: ProducerBatch, base_offset: int,
                        log_append_time: int) -> None:
        self._accumulator.complete(batch.tp)
        for i, (record, fut) in enumerate(zip(batch.records, batch.futures, strict=True)):
            offset = base_offset + i if base_offset >= 0 else -1
            ts = log_append_time if log_append_time >= 0 else record.timestamp
            fut._finish(RecordMetadata(batch.tp.topic, batch.tp.partition, offset, ts), None)

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, *,
                    muted: bool = True) -> None:
        if self._txn is not None and not isinstance(error, AbortableTransactionError | FatalTransactionError):
            # A record of the transaction is lost: it can no longer commit.
            if isinstance(error, KafkaError) and error.code is not None:
                self._txn.on_error(TxnApi.PRODUCE, error)
            if self._txn.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                self._txn.fail(error, fatal=False, api=TxnApi.PRODUCE)
        if muted:
            self._accumulator.complete(batch.tp)
        for fut in batch.futures:
            fut._finish(None, error)
