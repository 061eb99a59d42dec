"""The Prometheus endpoint of a node (`metrics.port`), its event-loop monitor and lag refresher.

A scrape takes a `metrics.Snapshot` of the node on the event loop (dict reads, no I/O) and
renders the text in a worker thread. The endpoint is plain HTTP/1.1 on trio, hostile input
bounded like any listener: at most MAX_CONNECTIONS at once (more are closed at once), a
request head of at most MAX_REQUEST_BYTES read within REQUEST_TIMEOUT_S, one request per
connection. `GET /metrics` answers the text exposition format; anything else 404/405.

Consumer lag needs each partition's high watermark where the group's offsets live (its
coordinator). A partition this node leads gives it directly; for the others, every
LAG_REFRESH_S the node asks the leaders with ListOffsets through its own client (as
kafka_exporter does) and reports the last answer.
"""

from __future__ import annotations

import structlog
import trio

from raftka.broker import metrics as m

log = structlog.get_logger("broker.metrics")

MAX_CONNECTIONS = 16
MAX_REQUEST_BYTES = 8192
REQUEST_TIMEOUT_S = 10.0
LOOP_PROBE_S = 0.1
LAG_REFRESH_S = 30.0


def take_snapshot(ctx, open_connections: int = 0, remote_ends: dict | None = None) -> m.Snapshot:
    """The node's state now, for one scrape (on the event loop: reads only)."""
    image = ctx.image
    node_id = ctx.config.node_id
    parts = []
    for partition in list(ctx.replicas.partitions.values()):
        state = partition.state
        plog = partition.log
        try:
            segments = len(plog.segments)
            size = plog.size
        except Exception:  # a log being closed or deleted this instant
            continue
        parts.append(m.PartitionStat(
            topic=partition.topic, partition=partition.index, is_leader=state.is_leader,
            replicas=len(state.replicas), isr=len(state.isr), min_isr=state.min_insync_replicas,
            size_bytes=size, log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset, segments=segments))
    active = image.controller.node_id == node_id
    offline = global_partitions = 0
    for topic in image.topics.values():
        for p in topic.partitions.values():
            global_partitions += 1
            if not p.has_leader or not image.is_live(p.leader):
                offline += 1
    fenced = sum(1 for b in image.brokers.values() if b.fenced)
    quorum = None
    try:
        status = ctx.loader.quorum.status()
        quorum = m.QuorumStat(
            role="observer" if ctx.loader.quorum.observer else "leader" if status.is_leader else (
                "follower" if status.leader_id is not None else "candidate"),
            term=status.term, commit_index=status.commit_index, applied_offset=image.offset,
            leader_id=-1 if status.leader_id is None else status.leader_id, observers=status.observers)
    except Exception:  # the quorum is starting or stopping
        pass
    groups: list[m.GroupOffset] = []
    by_state: dict[str, int] = {}
    coordinator = ctx.groups
    if coordinator is not None:
        for group in coordinator.list_groups():
            by_state[group.phase.value] = by_state.get(group.phase.value, 0) + 1
            for (topic, index), committed in list(group.offsets.items()):
                end = _local_end(ctx, topic, index)
                if end is None and remote_ends is not None:
                    end = remote_ends.get((topic, index))
                groups.append(m.GroupOffset(group.group_id, topic, index, committed.offset, end))
    return m.Snapshot(
        node_id=node_id, partitions=parts, active_controller=active, offline_partitions=offline,
        global_partitions=global_partitions, global_topics=len(image.topics), fenced_brokers=fenced,
        active_brokers=len(image.brokers) - fenced, quorum=quorum, groups=groups,
        groups_by_state=by_state, open_connections=open_connections,
        leader_replication_byte_rate=ctx.replicas.quotas.leader.meter.rate(trio.current_time()),
        follower_replication_byte_rate=ctx.replicas.quotas.follower.meter.rate(trio.current_time()),
        client_quotas={q.name: q.samples_now(trio.current_time()) for q in ctx.client_quotas.managers},
        mutation_tokens=ctx.client_quotas.mutation.tokens_now(trio.current_time()))


def _local_end(ctx, topic: str, index: int) -> int | None:
    partition = ctx.replicas.partitions.get((topic, index))
    if partition is None or not partition.is_leader:
        return None
    return partition.high_watermark


class MetricsServer:
    """One node's metrics endpoint plus the tasks that feed it."""

    def __init__(self, ctx, limits=None) -> None:
        self.ctx = ctx
        self.limits = limits  # broker.network.ListenerLimits: its open-connection count
        self.metrics: m.BrokerMetrics = ctx.metrics
        self.remote_ends: dict[tuple[str, int], int] = {}
        self._slots = trio.Semaphore(MAX_CONNECTIONS)

    def snapshot(self) -> m.Snapshot:
        connections = self.limits.quotas.total if self.limits is not None else 0
        return take_snapshot(self.ctx, connections, self.remote_ends)

    async def scrape(self) -> bytes:
        fams = m.families(self.metrics, self.snapshot())  # on the loop: consistent reads
        return await trio.to_thread.run_sync(m.render, fams)

    async def serve(self, host: str, port: int, *,
                    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host or None)
        bound = listeners[0].socket.getsockname()[1]
        log.info("metrics.listening", host=host, port=bound)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._loop_monitor)
            nursery.start_soon(self._lag_refresher)
            task_status.started(bound)
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    async def _handle(self, stream: trio.SocketStream) -> None:
        if self._slots.value == 0:
            await stream.aclose()
            return
        async with self._slots:
            try:
                with trio.move_on_after(REQUEST_TIMEOUT_S):
                    await self._answer(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            except Exception:  # one bad scrape closes its connection, never the node
                log.exception("metrics.request_failed")
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await stream.aclose()

    async def _answer(self, stream: trio.SocketStream) -> None:
        head = await _read_head(stream)
        if head is None:
            return
        status, body, content_type = route(head)
        if body is None:
            body = await self.scrape()
        await stream.send_all(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode("ascii") + body)

    async def _loop_monitor(self) -> None:
        """How late a LOOP_PROBE_S timer fires: the event loop's lag, sampled forever."""
        while True:
            start = trio.current_time()
            await trio.sleep(LOOP_PROBE_S)
            now = trio.current_time()
            self.metrics.loop_lag(max(0.0, now - start - LOOP_PROBE_S), now)

    async def _lag_refresher(self) -> None:
        """High watermarks of the partitions this node's groups committed to but does not lead."""
        from raftka.client.cluster import Cluster
        from raftka.client.list_offsets import LATEST, list_offsets_once
        from raftka.client.records import TopicPartition

        while True:
            await trio.sleep(LAG_REFRESH_S)
            coordinator = self.ctx.groups
            if coordinator is None or not self.ctx.serving:
                continue
            wanted = set()
            for group in coordinator.list_groups():
                for key in list(group.offsets):
                    if _local_end(self.ctx, *key) is None and self.ctx.image.topic_by_name(key[0]) is not None:
                        wanted.add(key)
            bootstrap = self._bootstrap()
            if not wanted or not bootstrap:
                self.remote_ends = {}
                continue
            try:
                with trio.fail_after(LAG_REFRESH_S / 2):
                    async with trio.open_nursery() as nursery:
                        cluster = Cluster(bootstrap, nursery, client_id=f"raftka-metrics-{self.ctx.config.node_id}")
                        try:
                            await cluster.refresh_metadata(sorted({t for t, _ in wanted}))
                            answer = await list_offsets_once(
                                cluster, {TopicPartition(t, p): LATEST for t, p in wanted})
                        finally:
                            await cluster.aclose()
                self.remote_ends = {(tp.topic, tp.partition): offset for tp, offset in answer.offsets.items()}
            except Exception as exc:  # the next round tries again
                log.info("metrics.lag_refresh_failed", error=repr(exc))

    def _bootstrap(self) -> list[str]:
        config = self.ctx.config
        registration = self.ctx.image.brokers.get(config.node_id)
        if registration is not None:
            address = registration.listener(config.inter_broker_listener_name or "")
            if address is None and registration.listeners:
                address = registration.listeners[0][1:]
            if address is not None:
                return [f"{address[0]}:{address[1]}"]
        return []


def route(head: bytes) -> tuple[str, bytes | None, str]:
    """(status line, body — None for the metrics text —, content type) for one request head.

    Only `GET /metrics` gets the metrics; `/` a pointer to it; anything else an error."""
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return "400 Bad Request", b"bad request line\n", "text/plain; charset=utf-8"
    method, target = parts[0], parts[1].split(b"?", 1)[0]
    if target != b"/metrics":
        if target == b"/":
            return "200 OK", b"raftka node: metrics at /metrics\n", "text/plain; charset=utf-8"
        return "404 Not Found", b"not found: try /metrics\n", "text/plain; charset=utf-8"
    if method != b"GET":
        return "405 Method Not Allowed", b"GET only\n", "text/plain; charset=utf-8"
    return "200 OK", None, "text/plain; version=0.0.4; charset=utf-8"


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request head (up to the blank line), or None when it is too long or cut short."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_REQUEST_BYTES:
            await stream.send_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
                                  b"Connection: close\r\n\r\n")
            return None
        chunk = await stream.receive_some(MAX_REQUEST_BYTES)
        if not chunk:
            return None
        buf += chunk
    return bytes(buf[: buf.index(b"\r\n\r\n")])


async def _close_quietly(cluster) -> None:
    with trio.move_on_after(1):
        try:
            await cluster.close()
        except Exception:
            pass

