"""AsyncShareConsumer: a member of a share group (KIP-932, Kafka's queues) on trio.

    async with AsyncShareConsumer(bootstrap, group_id="jobs") as consumer:
        consumer.subscribe(["jobs"])
        while True:
            for record in await consumer.poll(timeout_ms=1000):   # [ShareConsumerRecord]
                handle(record)          # accepted at the next poll() (implicit acknowledgement)

Work-queue semantics: the members of a share group take records from the same partitions
together. Each record is acquired by one member at a time, for the broker's lock duration
(`group.share.record.lock.duration.ms`, 30 s by default); it comes back to the group when the
member RELEASEs it, when the lock times out, or when the member leaves, each time with a
higher `delivery_count`, until the delivery limit (`group.share.delivery.count.limit`, 5)
archives it. ACCEPT and REJECT settle it for good.

Acknowledgement modes (Kafka's `share.acknowledgement.mode`):

- "implicit" (the default): every record a poll() returned is ACCEPTed by the next poll(),
  commit_sync()/commit_async() or close(). `acknowledge()` is refused (IllegalStateError).
- "explicit": the application acknowledges each record with `acknowledge(record, type)`
  (ACCEPT, RELEASE or REJECT) before its next poll(); a poll() with a record of the previous
  one unacknowledged raises IllegalStateError.

Acknowledgements travel with the next ShareFetch to the record's leader, or at once with
commit_sync() (ShareAcknowledge; it answers per partition). Membership is client/share_membership.py
(ShareGroupHeartbeat at the broker's interval, in the consumer's nursery). Each leader keeps one
share session for this member: epoch 0 opens it with every assigned partition it leads, later
requests add and forget partitions and carry the epoch on, and close() ends it (epoch -1) before
leaving the group (heartbeat epoch -1). A session the broker no longer knows is opened again and
carries the acknowledgements still owed; those lost with a dropped connection are not sent
again (their records come back to the group when their locks expire).

poll() sends a ShareFetch to every leader that has none out, each in the background, and
returns as soon as one brings records: a leader with nothing to give long-polls on its own, and
what it acquires later waits in the consumer for the next poll() (a ShareFetch is never
abandoned: its records are acquired the moment the broker answers). No ShareFetch goes to a
leader while records it gave wait undelivered, and close() or unsubscribe() lets those out end
and RELEASEs what no poll() returned. A poll() may return more than `max_poll_records` records:
it returns what every leader that answered gave. Where a share group starts reading a partition is
the group config `share.auto.offset.reset` (latest by default; see `AsyncAdmin.alter_configs`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import trio

from raftka.client.bootstrap import parse_bootstrap
from raftka.client.cluster import Cluster
from raftka.client.consumer import partitions_by_leader
from raftka.client.errors import (
    NO_ANSWER,
    IllegalStateError,
    KafkaError,
    error_for_code,
)
from raftka.client.lifecycle import ClusterClient, OwnedNursery
from raftka.client.protocol import ApiKey, ErrorCode, request_class
from raftka.client.records import ShareConsumerRecord, TopicPartition
from raftka.client.sdk_log import get_logger
from raftka.client.security import ClientSecurity
from raftka.client.share_membership import ShareMembership
from raftka.client.share_records import (
    AcknowledgeType,
    Acquired,
    acknowledgement_batches,
    delivered_records,
)

log = get_logger("raftka.client.share_consumer")

ShareFetchRequest = request_class(ApiKey.SHARE_FETCH)
ShareAcknowledgeRequest = request_class(ApiKey.SHARE_ACKNOWLEDGE)

ACKNOWLEDGEMENT_MODES = ("implicit", "explicit")
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = (1 << 31) - 1
SESSION_LOST = frozenset(int(c) for c in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH))

Ack = tuple[int, int, int]  # (first offset, last offset, AcknowledgeType or GAP)
AckResults = dict[TopicPartition, KafkaError | None]


def next_epoch(epoch: int) -> int:
    """A share session's epoch after a request with `epoch` succeeded (it wraps to 1, as Kafka's)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class _Session:
    """This member's share session on one leader: the epoch to send next, the partitions the
    broker's session holds, and the acknowledgements owed to it."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.epoch = INITIAL_EPOCH
        self.partitions: set[TopicPartition] = set()
        self.pending: dict[TopicPartition, list[Ack]] = {}
        self.lock = trio.Lock()  # one request at a time: each carries the epoch the last one left

    def owe(self, tp: TopicPartition, acks: Iterable[Ack]) -> None:
        self.pending.setdefault(tp, []).extend(acks)

    def reset(self, reason: str) -> None:
        """Start over with epoch 0. What is still owed stays owed: the records are this member's
        until their locks expire, and the next session carries the acknowledgements."""
        if self.epoch != INITIAL_EPOCH:
            log.info("share_consumer.session_reset", node=self.node_id, epoch=self.epoch, reason=reason)
        self.epoch, self.partitions = INITIAL_EPOCH, set()


class AsyncShareConsumer(ClusterClient):
    _what = "share consumer"

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        *,
        group_id: str,
        client_id: str = "raftka-share-consumer",
        acknowledgement_mode: str = "implicit",
        max_poll_records: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 << 20,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        check_crcs: bool = True,
        security: ClientSecurity | None = None,
    ) -> None:
        if not group_id:
            raise ValueError("group_id is empty; expected the share group's name")
        if acknowledgement_mode not in ACKNOWLEDGEMENT_MODES:
            raise ValueError(f"acknowledgement_mode must be 'implicit' or 'explicit', got {acknowledgement_mode!r}")
        if max_poll_records < 1:
            raise ValueError(f"max_poll_records must be 1 or more, got {max_poll_records}")
        parse_bootstrap(bootstrap_servers)  # a bad address is a ValueError here, not in start()
        self._bootstrap = bootstrap_servers
        self.group_id = group_id
        self.client_id = client_id
        self.acknowledgement_mode = acknowledgement_mode
        self.max_poll_records = max_poll_records
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.check_crcs = check_crcs
        self.security = security
        self._owner = OwnedNursery()
        self._cluster: Cluster | None = None
        self._group: ShareMembership | None = None
        self._subscription: tuple[str, ...] = ()
        self._assigned: frozenset[TopicPartition] = frozenset()
        self._sessions: dict[int, _Session] = {}
        # What the last poll() returned and is not acknowledged yet: (tp, offset) -> leader node.
        self._in_flight: dict[tuple[TopicPartition, int], int] = {}
        # ShareFetches out in the background (by leader), and what they brought that no poll()
        # returned yet: (leader, record), or the first error one met.
        self._fetching: set[int] = set()
        self._buffer: list[tuple[int, ShareConsumerRecord]] = []
        self._fetch_error: KafkaError | None = None
        self._arrived = trio.Event()

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        # A ShareFetch may long-poll: give each request its wait on top of the timeout.
        await self._open_cluster(self.request_timeout_ms + self.fetch_max_wait_ms)

    async def close(self) -> None:
        """Acknowledge what is owed (implicit mode: ACCEPT the last poll's records), close every
        share session (epoch -1), leave the group (epoch -1), close every connection. Records
        left unacknowledged in explicit mode go back to the group."""
        try:
            if self._cluster is not None and self._group is not None:
                with trio.move_on_after(self.request_timeout_ms / 1000):
                    if self.acknowledgement_mode == "implicit":
                        self._settle_in_flight(AcknowledgeType.ACCEPT)
                    await self._end_fetches()
                    await self._acknowledge_all(final=True)
                    await self._group.leave()
        finally:
            self._group = None
            self._in_flight.clear()
            self._buffer.clear()
            await self._close_cluster()

    # --- membership -------------------------------------------------------
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for `topics` (replacing any earlier subscription). Partitions
        arrive through the heartbeats; poll() fetches whatever is assigned at the time."""
        topics = tuple(sorted(set([topics] if isinstance(topics, str) else topics)))
        if not topics:
            raise ValueError("subscribe() needs at least one topic; use unsubscribe() to leave")
        cluster = self._require_cluster()
        self._subscription = topics
        cluster.topics.update(topics)
        if self._group is None:
            group = ShareMembership(cluster, self.group_id, retry_backoff_ms=self.retry_backoff_ms,
                                    request_timeout_ms=self.request_timeout_ms)
            group.attach(lambda: self._subscription, tuple)
            self._group = group
            assert self._owner.nursery is not None
            self._owner.nursery.start_soon(group.heartbeat_loop)
        self._group.request_rejoin("subscription changed")

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned to this member now (other members may fetch them too)."""
        if self._group is not None:
            self._apply_assignment(self._group)
        return set(self._assigned)

    @property
    def member_id(self) -> str | None:
        return None if self._group is None else self._group.member_id

    async def unsubscribe(self) -> None:
        """Acknowledge what is owed, close the share sessions and leave the group."""
        if self._group is None:
            return
        if self.acknowledgement_mode == "implicit":
            self._settle_in_flight(AcknowledgeType.ACCEPT)
        await self._end_fetches()
        await self._acknowledge_all(final=True)
        await self._group.leave()
        self._group, self._subscription, self._assigned = None, (), frozenset()

    async def _end_fetches(self) -> None:
        """Let the ShareFetches out in the background end (each within its wait) and give back
        what they brought that no poll() returned: RELEASEd, to be delivered again."""
        while self._fetching:
            await self._arrived.wait()
        buffered, self._buffer, self._fetch_error = self._buffer, [], None
        for node_id, r in buffered:
            self._session(node_id).owe(TopicPartition(r.topic, r.partition),
                                       [(r.offset, r.offset, AcknowledgeType.RELEASE)])

    def _apply_assignment(self, group: ShareMembership) -> None:
        target = group.target
        if target is not None:
            if target != self._assigned:
                log.info("share_consumer.assigned", group=self.group_id, member=group.member_id,
                         partitions=[f"{tp.topic}-{tp.partition}" for tp in sorted(target)])
            self._assigned = target
            group.reconciled()

    # --- acknowledgements -----------------------------------------------------
    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle one record of the last poll() (explicit mode only): ACCEPT (done), RELEASE
        (deliver it again) or REJECT (never again). Sent with the next poll() or commit."""
        if self.acknowledgement_mode != "explicit":
            raise IllegalStateError("acknowledge() needs acknowledgement_mode='explicit'; in implicit mode "
                                    "the next poll() or commit accepts every record the last poll() returned")
        kind = AcknowledgeType(type)
        tp = TopicPartition(record.topic, record.partition)
        node = self._in_flight.pop((tp, record.offset), None)
        if node is None:
            raise IllegalStateError(f"{record.topic}/{record.partition} offset {record.offset} is not a record "
                                    "of the last poll() awaiting acknowledgement (already acknowledged, or "
                                    "never delivered to this consumer)")
        self._session(node).owe(tp, [(record.offset, record.offset, kind)])

    def _settle_in_flight(self, kind: AcknowledgeType) -> None:
        owed: dict[tuple[int, TopicPartition], list[Ack]] = {}  # consecutive offsets as one range
        for (tp, offset), node in self._in_flight.items():
            acks = owed.get((node, tp))
            if acks is None:
                owed[(node, tp)] = [(offset, offset, kind)]
            elif acks[-1][1] + 1 == offset:
                acks[-1] = (acks[-1][0], offset, kind)
            else:
                acks.append((offset, offset, kind))
        for (node, tp), acks in owed.items():
            self._session(node).owe(tp, acks)
        self._in_flight.clear()

    async def commit_sync(self) -> AckResults:
        """Send every acknowledgement owed now (implicit mode: ACCEPT the last poll's records
        first) with ShareAcknowledge; wait for the answers. Returns, per partition acknowledged,
        None or the broker's error for it (InvalidRecordStateError: the lock had expired, ...)."""
        self._require_cluster()
        if self.acknowledgement_mode == "implicit":
            self._settle_in_flight(AcknowledgeType.ACCEPT)
        return await self._acknowledge_all(final=False)

    def commit_async(self, callback: Callable[[AckResults, BaseException | None], Any] | None = None) -> None:
        """commit_sync() in the background; `callback(results, error)` runs when it ends."""
        self._require_cluster()
        if self.acknowledgement_mode == "implicit":
            self._settle_in_flight(AcknowledgeType.ACCEPT)

        async def run() -> None:
            results: AckResults = {}
            error: BaseException | None = None
            try:
                results = await self._acknowledge_all(final=False)
            except KafkaError as exc:
                error = exc
                log.info("share_consumer.commit_async_failed", group=self.group_id, error=str(exc))
            if callback is not None:
                callback(results, error)

        assert self._owner.nursery is not None
        self._owner.nursery.start_soon(run)

    async def _acknowledge_all(self, *, final: bool) -> AckResults:
        results: AckResults = {}
        sessions = [s for s in self._sessions.values()
                    if s.epoch != INITIAL_EPOCH and (final or s.pending)]
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(self._acknowledge, session, final, results)
        return results

    async def _acknowledge(self, session: _Session, final: bool, results: AckResults) -> None:
        async with session.lock:
            if session.epoch == INITIAL_EPOCH:
                return
            pending, session.pending = session.pending, {}
            results.update(await self._send_acknowledgements(session, pending, FINAL_EPOCH if final else session.epoch))

    async def _send_acknowledgements(self, session: _Session, acks: dict[TopicPartition, list[Ack]],
                                     epoch: int) -> AckResults:
        """ShareAcknowledge `acks` in `session` (its lock held) with `epoch` (-1 closes the
        session). The session moves on to its next epoch, or starts over when the broker lost
        it. Returns, per partition, None or its error."""
        group = self._group
        assert group is not None
        request = ShareAcknowledgeRequest(group_id=self.group_id, member_id=group.member_id,
                                          share_session_epoch=epoch, topics=self._ack_topics(acks))
        try:
            response = await self._require_cluster().send_to(session.node_id, ApiKey.SHARE_ACKNOWLEDGE, request)
        except NO_ANSWER as exc:  # applied or not: unknown; the session starts over
            session.reset(str(exc))
            return dict.fromkeys(acks, exc)
        code = response.error_code
        if epoch == FINAL_EPOCH or code:
            session.reset("closed" if epoch == FINAL_EPOCH else ErrorCode(code).name)
        else:
            session.epoch = next_epoch(epoch)
        if code:
            error = error_for_code(code, f"ShareAcknowledge to broker {session.node_id}: "
                                   f"{response.error_message or ErrorCode(code).name}")
            return dict.fromkeys(acks, error)
        results = self._partition_errors(response.responses, "ShareAcknowledge", "error_code")
        for tp in acks:
            results.setdefault(tp, None)
        return results

    def _by_topic_id(self, tps: Iterable[TopicPartition]) -> dict[uuid.UUID, list[TopicPartition]]:
        metadata = self._require_cluster().metadata
        out: dict[uuid.UUID, list[TopicPartition]] = {}
        for tp in sorted(tps):
            topic_id = metadata.topic_id(tp.topic)
            if topic_id is None:
                log.info("share_consumer.topic_id_unknown", topic=tp.topic)
                continue
            out.setdefault(topic_id, []).append(tp)
        return out

    def _ack_topics(self, acks: dict[TopicPartition, list[Ack]], also: Iterable[TopicPartition] = ()) -> list[dict]:
        """ShareFetch/ShareAcknowledge topics by id: the partitions owed `acks`, and `also`."""
        return [{"topic_id": topic_id, "partitions": [
                    {"partition_index": tp.partition, "acknowledgement_batches": acknowledgement_batches(acks.get(tp, ()))}
                    for tp in tps]}
                for topic_id, tps in self._by_topic_id(set(acks) | set(also)).items()]

    def _partition_errors(self, responses, api: str, field: str) -> AckResults:
        metadata = self._require_cluster().metadata
        out: AckResults = {}
        for t in responses:
            name = metadata.topic_name(t.topic_id) or str(t.topic_id)
            for p in t.partitions:
                code = getattr(p, field)
                tp = TopicPartition(name, p.partition_index)
                out[tp] = error_for_code(code, f"{api} {name}/{p.partition_index}") if code else None
        return out

    # --- polling ----------------------------------------------------------------
    def _session(self, node_id: int) -> _Session:
        session = self._sessions.get(node_id)
        if session is None:
            session = self._sessions[node_id] = _Session(node_id)
        return session

    async def poll(self, timeout_ms: float = 0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to `timeout_ms` for some; [] if none
        came. Implicit mode first accepts what the last poll() returned; explicit mode raises
        IllegalStateError while any of those is unacknowledged."""
        cluster = self._require_cluster()
        group = self._group
        if group is None:
            raise IllegalStateError("the share consumer is not subscribed to any topic; call subscribe()")
        if self.acknowledgement_mode == "implicit":
            self._settle_in_flight(AcknowledgeType.ACCEPT)
        elif self._in_flight:
            raise IllegalStateError(f"{len(self._in_flight)} record(s) of the last poll() are not acknowledged; "
                                    "in explicit mode every record must be acknowledged before the next poll()")
        deadline = trio.current_time() + timeout_ms / 1000
        while True:
            if group.fatal is not None:
                raise group.fatal
            self._apply_assignment(group)
            remaining_ms = max(0, int((deadline - trio.current_time()) * 1000))
            try:
                got = await self._fetch_round(min(self.fetch_max_wait_ms, remaining_ms))
            except NO_ANSWER as exc:
                log.info("share_consumer.fetch_failed", error=str(exc))
                got = []
                await cluster.refresh_metadata_if_reachable()
                await trio.sleep(min(self.retry_backoff_ms / 1000, max(0.0, deadline - trio.current_time())))
            if got:
                return got
            if trio.current_time() >= deadline:
                return []
            if not self._assigned:  # waiting for an assignment: look again soon
                await trio.sleep(min(0.05, max(0.0, deadline - trio.current_time())))

    async def _fetch_round(self, max_wait_ms: int) -> list[ShareConsumerRecord]:
        """A ShareFetch, each in the background, to every leader of an assigned partition (and
        every leader owed an acknowledgement or holding a session to shrink) that has none out
        and none of whose records wait in the buffer; then what the answers brought: at once if
        records wait, else as soon as one brings some, or when every fetch this round started
        has answered (with none out, after `max_wait_ms`). A fetch still out keeps what it
        acquires for a later poll(): one leader's long poll never holds up another's records,
        nor the acknowledgements they carry back."""
        by_node = await partitions_by_leader(self._require_cluster(), self._assigned)
        nodes = set(by_node) | {n for n, s in self._sessions.items() if s.pending or s.partitions}
        nodes -= self._fetching | {node_id for node_id, _r in self._buffer}
        nursery = self._owner.nursery
        assert nursery is not None
        for node_id in sorted(nodes):
            self._fetching.add(node_id)
            nursery.start_soon(self._fetch_in_background, node_id, by_node.get(node_id, []), max_wait_ms)
        with trio.move_on_after(math.inf if nodes else max_wait_ms / 1000):
            while not self._buffer and self._fetch_error is None and (nodes & self._fetching if nodes
                                                                      else self._fetching):
                await self._arrived.wait()
        got, self._buffer = self._buffer, []
        if self._fetch_error is not None:
            error, self._fetch_error = self._fetch_error, None
            # Records acquired from the other leaders go back: the application never sees them.
            for node_id, r in got:
                self._session(node_id).owe(TopicPartition(r.topic, r.partition),
                                           [(r.offset, r.offset, AcknowledgeType.RELEASE)])
            raise error
        tps: dict[tuple[str, int], TopicPartition] = {}
        for node_id, r in got:
            tp = tps.get((r.topic, r.partition))
            if tp is None:
                tp = tps[(r.topic, r.partition)] = TopicPartition(r.topic, r.partition)
            self._in_flight[(tp, r.offset)] = node_id
        return [r for _node, r in got]

    async def _fetch_in_background(self, node_id: int, tps: list[TopicPartition], max_wait_ms: int) -> None:
        """One ShareFetch (`_fetch_from`); its records, or its error, for poll() to take."""
        try:
            records = await self._fetch_from(node_id, tps, max_wait_ms)
            self._buffer.extend((node_id, r) for r in records)
        except KafkaError as exc:
            if self._fetch_error is None:
                self._fetch_error = exc
        finally:
            self._fetching.discard(node_id)
            arrived, self._arrived = self._arrived, trio.Event()
            arrived.set()

    async def _fetch_from(self, node_id: int, tps: list[TopicPartition], max_wait_ms: int,
                          ) -> list[ShareConsumerRecord]:
        session = self._session(node_id)
        async with session.lock:
            want = set(tps)
            if session.epoch == INITIAL_EPOCH:
                if not want:
                    return []
                added, removed, acks = want, set(), {}
            else:
                added, removed = want - session.partitions, session.partitions - want
                if not want:  # nothing left to fetch here: close the session with what is owed
                    pending, session.pending = session.pending, {}
                    self._log_failures(await self._send_acknowledgements(session, pending, FINAL_EPOCH))
                    return []
                if any(tp in session.pending for tp in removed):
                    # Acknowledge what a forgotten partition is owed while it is still in the session.
                    owed = {tp: session.pending.pop(tp) for tp in removed if tp in session.pending}
                    self._log_failures(await self._send_acknowledgements(session, owed, session.epoch))
                    if session.epoch == INITIAL_EPOCH:
                        return []
                acks, session.pending = session.pending, {}
            epoch = session.epoch
            group = self._group
            assert group is not None
            request = ShareFetchRequest(
                group_id=self.group_id, member_id=group.member_id, share_session_epoch=epoch,
                max_wait_ms=max_wait_ms, min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                max_records=self.max_poll_records, batch_size=self.max_poll_records,
                topics=self._ack_topics(acks, also=added),
                forgotten_topics_data=[{"topic_id": topic_id, "partitions": [tp.partition for tp in tps]}
                                       for topic_id, tps in self._by_topic_id(removed).items()])
            try:
                response = await self._require_cluster().send_to(node_id, ApiKey.SHARE_FETCH, request)
            except NO_ANSWER as exc:
                session.reset(str(exc))
                raise
            code = response.error_code
            if code in SESSION_LOST:
                session.reset(ErrorCode(code).name)
                return []
            if code:
                error = error_for_code(code, f"ShareFetch from broker {node_id}: "
                                       f"{response.error_message or ErrorCode(code).name}")
                if error.retriable:
                    log.info("share_consumer.fetch_refused", node=node_id, error=str(error))
                    session.reset(ErrorCode(code).name)
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    return []
                raise error
            session.epoch = next_epoch(epoch)
            session.partitions = (session.partitions | added) - removed
            return self._delivered(session, response)

    def _delivered(self, session: _Session, response) -> list[ShareConsumerRecord]:
        cluster = self._require_cluster()
        out: list[ShareConsumerRecord] = []
        stale: list[TopicPartition] = []
        for t in response.responses:
            name = cluster.metadata.topic_name(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if p.acknowledge_error_code:
                    log.info("share_consumer.acknowledge_failed", topic=name, partition=p.partition_index,
                             error=ErrorCode(p.acknowledge_error_code).name, message=p.acknowledge_error_message)
                if p.error_code:
                    error = error_for_code(p.error_code, f"ShareFetch {name}/{p.partition_index}")
                    if error.invalid_metadata or error.retriable:
                        stale.append(tp)  # forgotten here at the next round if it moved
                        continue
                    raise error
                acquired = [Acquired(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
                delivered = delivered_records(name, p.partition_index, p.records, acquired, verify_crc=self.check_crcs)
                if delivered.settled:
                    session.owe(tp, delivered.settled)
                out.extend(delivered.records)
        if stale:
            cluster.mark_leader_unknown(stale)
        return out

    def _log_failures(self, results: AckResults) -> None:
        for tp, error in results.items():
            if error is not None:
                log.info("share_consumer.acknowledge_failed", topic=tp.topic, partition=tp.partition, error=str(error))


__all__ = ["AcknowledgeType", "AsyncShareConsumer", "next_epoch"]
