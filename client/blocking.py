"""Blocking facades over the trio SDK, for plain Python code and Spark executors.

Each facade owns one thread running `trio.run`; the async object is opened
and closed inside that thread's main task (trio wants one task for both), and
calls cross over with `trio.from_thread` and the loop's token. `close()` (or
leaving the `with` block) stops the thread. Do not call a facade from inside
a trio loop callback (its own thread): that would deadlock, and trio raises
RuntimeError instead.

    with Producer("127.0.0.1:9092", acks="all") as producer:
        producer.send("events", b"v", key=b"k").result(timeout=10)
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import trio

from raftka.client.admin import (
    AsyncAdmin,
    ClusterDescription,
    ConfigEntry,
    NewTopic,
    QuotaEntity,
    QuotaFilter,
    TopicDescription,
)
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import IllegalStateError, KafkaTimeoutError
from raftka.client.producer import AsyncProducer
from raftka.client.records import (
    ConsumerRecord,
    RecordMetadata,
    ShareConsumerRecord,
    TopicPartition,
)
from raftka.client.share_consumer import AckResults, AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType

T = TypeVar("T")


class _Portal:
    """A trio loop on its own thread, hosting one async SDK object."""

    def __init__(self, factory: Callable[[], Any], name: str) -> None:
        self._factory = factory
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self.target: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced to the constructor
            if not self._ready.is_set():
                self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        obj = self._factory()
        await obj.start()
        try:
            self.target = obj
            self._ready.set()
            await self._stop.wait()
        finally:
            with trio.CancelScope(shield=True):
                await obj.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._stop is not None and not self._stop.is_set()

    def _check(self) -> None:
        if not self.alive:
            raise IllegalStateError("this client is closed")

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run async `fn` on the loop and wait for its result."""
        self._check()
        return trio.from_thread.run(functools.partial(fn, *args, **kwargs),
                                    trio_token=self._token)

    def call_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check()
        return trio.from_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                         trio_token=self._token)

    def close(self, before: Callable[[], Any] | None = None) -> None:
        if not self.alive:
            return
        try:
            if before is not None:
                self.call(before)
            assert self._stop is not None
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        except trio.RunFinishedError:
            pass
        self._thread.join()


class _Facade:
    _portal: _Portal

    def close(self) -> None:
        self._portal.close()

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(_Facade):
    """Blocking AsyncProducer; takes the same keyword options."""

    def __init__(self, bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
                 **options: Any) -> None:
        self._portal = _Portal(lambda: AsyncProducer(bootstrap_servers, **options),
                               "raftka-producer")
        self._producer: AsyncProducer = self._portal.target

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; the returned Future resolves to its RecordMetadata
        (`.result(timeout)`) or its delivery error."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        def done(meta: RecordMetadata | None, exc: BaseException | None) -> None:
            if exc is not None:
                result.set_exception(exc)
            else:
                result.set_result(meta)  # type: ignore[arg-type]

        def queue() -> None:
            self._producer.send_nowait(topic, value, key, headers, partition,
                                       timestamp_ms).add_callback(done)

        self._portal.call_sync(queue)
        return result

    def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                      headers: Sequence[tuple[str, bytes | None]] | None = None,
                      partition: int | None = None, timestamp_ms: int | None = None,
                      ) -> RecordMetadata:
        return self._portal.call(self._producer.send, topic, value, key, headers, partition,
                                 timestamp_ms)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything sent is delivered or failed (KafkaTimeoutError
        after `timeout` seconds)."""
        async def flush() -> None:
            if timeout is None:
                await self._producer.flush()
                return
            with trio.fail_after(timeout):
                await self._producer.flush()

        try:
            self._portal.call(flush)
        except trio.TooSlowError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout}s") from None

    def partitions_for(self, topic: str) -> list[int]:
        return self._portal.call(self._producer.partitions_for, topic)

    # Transactions: the AsyncProducer's methods, blocking (same errors).
    def init_transactions(self) -> None:
        self._portal.call(self._producer.init_transactions)

    def begin_transaction(self) -> None:
        self._portal.call_sync(self._producer.begin_transaction)

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, Any],
                                    group_metadata: Any) -> None:
        self._portal.call(self._producer.send_offsets_to_transaction, offsets, group_metadata)

    def commit_transaction(self) -> None:
        self._portal.call(self._producer.commit_transaction)

    def abort_transaction(self) -> None:
        self._portal.call(self._producer.abort_transaction)


class Consumer(_Facade):
    """Blocking AsyncConsumer; takes the same keyword options."""

    def __init__(self, bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
                 **options: Any) -> None:
        self._portal = _Portal(lambda: AsyncConsumer(bootstrap_servers, **options),
                               "raftka-consumer")
        self._consumer: AsyncConsumer = self._portal.target

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._portal.call_sync(self._consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._portal.call_sync(self._consumer.assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._portal.call_sync(self._consumer.seek, tp, offset)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._portal.call_sync(self._consumer.seek_to_beginning, *tps)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._portal.call_sync(self._consumer.seek_to_end, *tps)

    def position(self, tp: TopicPartition) -> int:
        return self._portal.call(self._consumer.position, tp)

    def poll(self, timeout_ms: float = 0, max_records: int | None = None,
             ) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._portal.call(self._consumer.poll, timeout_ms, max_records)

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.call(self._consumer.beginning_offsets, list(tps))

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.call(self._consumer.end_offsets, list(tps))

    # -- consumer groups (need group_id) --------------------------------------------

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  on_partitions_assigned: Callable[[set[TopicPartition]], Any] | None = None,
                  on_partitions_revoked: Callable[[set[TopicPartition]], Any] | None = None) -> None:
        """Join the consumer's group for `topics` (or a regex `pattern`). The callbacks run on the
        consumer's own thread, during poll()."""
        self._portal.call_sync(functools.partial(
            self._consumer.subscribe, list(topics), pattern=pattern,
            on_partitions_assigned=on_partitions_assigned, on_partitions_revoked=on_partitions_revoked))

    def subscription(self) -> set[str]:
        return self._portal.call_sync(self._consumer.subscription)

    def group_metadata(self) -> Any:
        """For Producer.send_offsets_to_transaction (see AsyncConsumer.group_metadata)."""
        return self._portal.call_sync(self._consumer.group_metadata)

    def unsubscribe(self) -> None:
        self._portal.call(self._consumer.unsubscribe)

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit `offsets` (default: the current positions) and wait for the coordinator."""
        self._portal.call(self._consumer.commit, None if offsets is None else dict(offsets))

    def committed(self, tp: TopicPartition) -> int | None:
        return self._portal.call(self._consumer.committed, tp)

    def pause(self, *tps: TopicPartition) -> None:
        self._portal.call_sync(self._consumer.pause, *tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._portal.call_sync(self._consumer.resume, *tps)

    def paused(self) -> set[TopicPartition]:
        return self._portal.call_sync(self._consumer.paused)


class ShareConsumer(_Facade):
    """Blocking AsyncShareConsumer (a share group member); takes the same keyword options.

        with ShareConsumer(bootstrap, group_id="jobs", acknowledgement_mode="explicit") as c:
            c.subscribe(["jobs"])
            for record in c.poll(1000):
                c.acknowledge(record, AcknowledgeType.ACCEPT)
    """

    def __init__(self, bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092", **options: Any) -> None:
        self._portal = _Portal(lambda: AsyncShareConsumer(bootstrap_servers, **options), "raftka-share-consumer")
        self._consumer: AsyncShareConsumer = self._portal.target

    def subscribe(self, topics: Iterable[str]) -> None:
        self._portal.call_sync(self._consumer.subscribe, list(topics))

    def subscription(self) -> set[str]:
        return self._portal.call_sync(self._consumer.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self._portal.call_sync(self._consumer.assignment)

    def unsubscribe(self) -> None:
        self._portal.call(self._consumer.unsubscribe)

    def poll(self, timeout_ms: float = 0) -> list[ShareConsumerRecord]:
        return self._portal.call(self._consumer.poll, timeout_ms)

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._portal.call_sync(self._consumer.acknowledge, record, type)

    def commit_sync(self) -> AckResults:
        return self._portal.call(self._consumer.commit_sync)

    def commit_async(self, callback: Callable[[AckResults, BaseException | None], Any] | None = None) -> None:
        """See AsyncShareConsumer.commit_async; the callback runs on the consumer's own thread."""
        self._portal.call_sync(self._consumer.commit_async, callback)


class Admin(_Facade):
    """Blocking AsyncAdmin; takes the same keyword options."""

    def __init__(self, bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
                 **options: Any) -> None:
        self._portal = _Portal(lambda: AsyncAdmin(bootstrap_servers, **options), "raftka-admin")
        self._admin: AsyncAdmin = self._portal.target

    def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False
                      ) -> None:
        self._portal.call(functools.partial(self._admin.create_topics, list(new_topics),
                                            validate_only=validate_only))

    def delete_topics(self, topics: Iterable[str]) -> None:
        self._portal.call(self._admin.delete_topics, list(topics))

    def create_partitions(self, new_counts: Mapping[str, int]) -> None:
        self._portal.call(self._admin.create_partitions, dict(new_counts))

    def list_topics(self) -> list[str]:
        return self._portal.call(self._admin.list_topics)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        return self._portal.call(self._admin.describe_topics,
                                 None if topics is None else list(topics))

    def describe_cluster(self) -> ClusterDescription:
        return self._portal.call(self._admin.describe_cluster)

    def describe_configs(self, topic: str | None = None, *, broker_id: int | None = None,
                         keys: Iterable[str] | None = None) -> dict[str, ConfigEntry]:
        return self._portal.call(functools.partial(self._admin.describe_configs, topic,
                                                   broker_id=broker_id, keys=keys))

    def alter_configs(self, topic: str | None = None, *, broker_id: int | None = None,
                      broker_default: bool = False, group: str | None = None,
                      set_configs: Mapping[str, str] | None = None, delete: Iterable[str] = (),
                      validate_only: bool = False) -> None:
        """See AsyncAdmin.alter_configs (a topic's, a broker's, the broker defaults' or a group's)."""
        self._portal.call(functools.partial(
            self._admin.alter_configs, topic, broker_id=broker_id, broker_default=broker_default, group=group,
            set_configs=dict(set_configs or {}), delete=list(delete), validate_only=validate_only))

    def alter_client_quotas(self, entity: QuotaEntity, set_quotas: Mapping[str, float] | None = None,
                            remove: Iterable[str] = (), *, validate_only: bool = False) -> None:
        self._portal.call(functools.partial(self._admin.alter_client_quotas, dict(entity), dict(set_quotas or {}),
                                            list(remove), validate_only=validate_only))

    def describe_client_quotas(self, components: Iterable[QuotaFilter] = (), *, strict: bool = False
                               ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        return self._portal.call(functools.partial(self._admin.describe_client_quotas, list(components),
                                                   strict=strict))
