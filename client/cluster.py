"""The cluster shell: bootstrap, metadata refreshes, one connection per broker.

Owned by a producer, consumer or admin, which passes its nursery (connection
reader tasks live there). Concurrent refreshes coalesce: callers that ask
while one is running wait for it instead of sending another.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import trio

from raftka.client.bootstrap import parse_bootstrap
from raftka.client.connection import BrokerConnection
from raftka.client.errors import (
    NO_ANSWER,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)
from raftka.client.metadata import ClusterMetadata
from raftka.client.protocol import ApiKey, Message, MetadataRequest
from raftka.client.records import TopicPartition
from raftka.client.sdk_log import get_logger
from raftka.client.security import ClientSecurity

log = get_logger("raftka.client.cluster")

__all__ = ["Cluster", "parse_bootstrap"]


class Cluster:
    def __init__(self, bootstrap_servers: str | Iterable[str], nursery: trio.Nursery, *,
                 client_id: str = "raftka-python", request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, allow_auto_topic_creation: bool = False,
                 security: ClientSecurity | None = None, reachable_wait_ms: int = 0) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        # How long a request waits for some broker to be reachable (an admin's
        # default_api_timeout_ms); 0: one try over the known brokers and bootstrap servers.
        self.reachable_wait = reachable_wait_ms / 1000
        self.security = security
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterMetadata()
        self._nursery = nursery
        self._connections: dict[int, BrokerConnection] = {}
        self._connect_locks: dict[int, trio.Lock] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._bootstrap_lock = trio.Lock()
        self._refreshing: trio.Event | None = None
        self._refresh_error: BaseException | None = None
        self.topics: set[str] = set()  # topics whose metadata the owner needs
        self.want_all_topics = False
        self._closed = False

    # --- connections -----------------------------------------------------
    async def connection(self, node_id: int) -> BrokerConnection:
        """The pooled connection to broker `node_id`, connecting if needed.
        Raises KafkaConnectionError if the broker is unknown or unreachable."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connect_locks.setdefault(node_id, trio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            broker = self.metadata.broker(node_id)
            if broker is None and not self.metadata.brokers:
                # Nothing known yet (the cluster was down when the client started): ask first.
                await self.refresh_metadata()
                broker = self.metadata.broker(node_id)
            if broker is None:
                raise KafkaConnectionError(
                    f"broker {node_id} is not in the cluster metadata "
                    f"(known: {sorted(self.metadata.brokers)})")
            boot = self._bootstrap_conn
            if boot is not None and not boot.closed and (boot.host, boot.port) == (broker.host, broker.port):
                # The bootstrap server is this broker: its connection becomes the broker's
                # (as librdkafka does), rather than a second socket and handshake.
                self._bootstrap_conn = None
                boot.node_id = node_id
                self._connections[node_id] = boot
                return boot
            conn = await self._connect(broker.host, broker.port, node_id)
            self._connections[node_id] = conn
            return conn

    async def _connect(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        return await BrokerConnection.connect(
            self._nursery, host, port, client_id=self.client_id,
            request_timeout=self.request_timeout, node_id=node_id, security=self.security)

    async def any_connection(self) -> BrokerConnection:
        """A live connection to some broker: a pooled one, a known broker, or a
        bootstrap server (tried in random order). When none answers: KafkaConnectionError
        ("no broker reachable"), or, with `reachable_wait_ms`, tries again every
        `retry_backoff_ms` until that has passed, then KafkaTimeoutError."""
        deadline = trio.current_time() + self.reachable_wait
        while True:
            try:
                return await self._any_connection_once()
            except KafkaConnectionError as exc:
                if not self.reachable_wait or self._closed or not exc.retriable:
                    raise
                if trio.current_time() + self.retry_backoff > deadline:
                    raise KafkaTimeoutError(
                        f"{exc.message}; no broker reachable within {self.reachable_wait * 1000:.0f} ms"
                        " (default_api_timeout_ms)") from exc
                log.info("client.cluster_unreachable", error=exc.message)
                await trio.sleep(self.retry_backoff)

    async def _any_connection_once(self) -> BrokerConnection:
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        async with self._bootstrap_lock:
            if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
                return self._bootstrap_conn
            candidates = [(b.host, b.port, b.node_id) for b in self.metadata.brokers.values()]
            boot = list(self.bootstrap)
            random.shuffle(boot)
            candidates += [(h, p, None) for h, p in boot]
            errors: list[str] = []
            for host, port, node_id in candidates:
                try:
                    conn = await self._connect(host, port, node_id)
                except NO_ANSWER as exc:  # refused, or accepted and never answered: try the next one
                    if not exc.retriable:  # a TLS refusal: the client's configuration, not an outage
                        raise
                    errors.append(str(exc))
                    continue
                if node_id is not None:
                    self._connections[node_id] = conn
                else:
                    self._bootstrap_conn = conn
                return conn
            raise KafkaConnectionError(
                "no broker reachable; tried " + ", ".join(f"{h}:{p}" for h, p, _ in candidates)
                + (f" ({errors[-1]})" if errors else ""))

    async def send_any(self, api_key: ApiKey, body: Any, **kw: Any) -> Message:
        """Send to any broker, once more on a fresh connection if the first one dies."""
        for attempt in range(2):
            conn = await self.any_connection()
            try:
                return await conn.request(api_key, body, **kw)
            except KafkaConnectionError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def send_to(self, node_id: int, api_key: ApiKey, body: Any, **kw: Any) -> Message:
        conn = await self.connection(node_id)
        return await conn.request(api_key, body, **kw)

    async def controller_connection(self) -> BrokerConnection:
        """The connection to the controller (any broker if the cluster names none)."""
        if self.metadata.controller_id < 0:
            await self.refresh_metadata()
        if self.metadata.controller_id >= 0:
            try:
                return await self.connection(self.metadata.controller_id)
            except KafkaConnectionError:
                pass
        return await self.any_connection()

    # --- metadata --------------------------------------------------------
    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               all_topics: bool = False) -> ClusterMetadata:
        """Fetch fresh metadata for `topics` plus the owner's interest set, or for
        every topic with `all_topics` (or when the owner set `want_all_topics`).
        Concurrent callers of the interest-set kind share one request."""
        if topics is not None:
            self.topics.update(topics)
        all_topics = all_topics or self.want_all_topics
        if all_topics:
            self.metadata = await self._fetch_metadata(all_topics=True)
            return self.metadata
        if self._refreshing is not None:
            event = self._refreshing
            await event.wait()
            if self._refresh_error is not None:
                raise self._refresh_error
            return self.metadata
        self._refreshing = trio.Event()
        self._refresh_error = None
        try:
            self.metadata = await self._fetch_metadata(all_topics=False)
            return self.metadata
        except BaseException as exc:
            self._refresh_error = exc if isinstance(exc, Exception) else KafkaConnectionError(
                "metadata refresh cancelled")
            raise
        finally:
            self._refreshing.set()
            self._refreshing = None

    async def bootstrap_if_reachable(self) -> None:
        """A client's start(): read the metadata once if some broker answers. A cluster that
        is down (or does not answer within the request timeout) is not an error, as Kafka's
        clients start without one and bootstrap at their first call; any other error (TLS, SASL,
        versions) is raised."""
        try:  # one pass over the bootstrap servers, never reachable_wait_ms
            self.metadata = await self._fetch_metadata(all_topics=False, wait=False)
        except NO_ANSWER as exc:
            if not exc.retriable:
                raise
            log.info("client.bootstrap_unreachable", error=str(exc))

    async def refresh_metadata_if_reachable(self, topics: Iterable[str] | None = None) -> None:
        """refresh_metadata for a client that waits out a cluster no broker of which answers (a
        consumer's poll: Kafka's consumers retry until the poll times out, they never raise
        because the whole cluster is restarting). No answer (errors.NO_ANSWER) is logged, not raised."""
        try:
            await self.refresh_metadata(topics)
        except NO_ANSWER as exc:
            log.info("client.metadata_unreachable", error=str(exc))

    async def _fetch_metadata(self, *, all_topics: bool, wait: bool = True) -> ClusterMetadata:
        last: Exception | None = None
        for _ in range(3):
            conn = await (self.any_connection() if wait else self._any_connection_once())
            version = conn.version(ApiKey.METADATA)
            if all_topics:
                req_topics = [] if version == 0 else None
            else:
                req_topics = [{"name": t} for t in sorted(self.topics)]
            request = MetadataRequest(
                topics=req_topics, allow_auto_topic_creation=self.allow_auto_topic_creation)
            try:
                response = await conn.request(ApiKey.METADATA, request, version=version)
            except KafkaConnectionError as exc:
                last = exc
                continue
            new = self.metadata.updated(response, all_topics=all_topics)
            self._forget_departed(new)
            return new
        assert last is not None
        raise last

    def _forget_departed(self, new: ClusterMetadata) -> None:
        for node_id in list(self._connections):
            if node_id not in new.brokers:
                conn = self._connections.pop(node_id)
                self._nursery.start_soon(conn.aclose)

    def mark_leader_unknown(self, tps: Iterable[TopicPartition]) -> None:
        self.metadata = self.metadata.without_leader(tps)

    async def wait_for_partitions(self, topic: str, timeout: float) -> list[int]:
        """The partition ids of `topic`, refreshing metadata until it is known.
        Raises the topic's Kafka error (e.g. UnknownTopicOrPartitionError) or
        KafkaTimeoutError when `timeout` passes."""
        self.topics.add(topic)
        deadline = trio.current_time() + timeout
        last_error: KafkaError | None = None
        while True:
            parts = self.metadata.partitions_for(topic)
            if parts:
                return parts
            try:
                await self.refresh_metadata([topic])
            except NO_ANSWER as exc:  # no broker answers (yet): wait within the timeout
                if not exc.retriable:
                    raise
                last_error = exc
            parts = self.metadata.partitions_for(topic)
            if parts:
                return parts
            code = self.metadata.topic_errors.get(topic)
            if code is not None:
                last_error = error_for_code(code, f"topic {topic!r}")
                if not last_error.retriable:
                    raise last_error
            if trio.current_time() + self.retry_backoff > deadline:
                if last_error is not None and not isinstance(last_error, NO_ANSWER):
                    raise last_error
                raise KafkaTimeoutError(
                    f"metadata for topic {topic!r} not available within {timeout}s"
                    + (f" ({last_error.message})" if last_error is not None else ""))
            await trio.sleep(self.retry_backoff)

    async def aclose(self) -> None:
        self._closed = True
        conns = list(self._connections.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._connections.clear()
        self._bootstrap_conn = None
        for conn in conns:
            await conn.aclose()
