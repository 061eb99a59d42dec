"""ShareFetch (78) and ShareAcknowledge (79): a share group's members take records from the
partitions this broker leads (KIP-932), through broker/group/share_partition_manager.py.

ShareFetch, in Kafka's order: the share session first (broker/group/share_session_state.py:
epoch 0 opens, n continues, -1 closes; a session error answers the whole request), then the
piggy-backed acknowledgements (each partition's result in `acknowledge_error_code`, written
by the persister before this answer), then (not for epoch -1, nor a v2 `is_renew_ack`
request) the fetch: records are acquired for the member from every partition of the
session, and returned as whole batches read with `Partition.read` (Fetch's read; sent with
sendfile, broker/net/zero_copy.py) with the acquired offsets in `acquired_records` (ranges
of at most `batch_size` offsets). The client keeps the acquired records of those batches.

Long polling: with nothing acquirable, or fewer than `min_bytes` readable, the request waits
up to `max_wait_ms` for new records (the high watermark) or released ones. `max_records`
bounds the records acquired in one answer, across its partitions, strictly (Kafka's
record_limit acquire mode; the batch-optimized mode of v2 may give more, raftka never does).
The share group's `share.isolation.level` (read_uncommitted by default) decides whether
records are read up to the high watermark or, read_committed, up to the last stable offset,
with the records of aborted transactions archived instead of delivered (Kafka's rule; the
transaction markers' offsets are acquired with the rest, as on Kafka).

ShareAcknowledge: the session (epoch 0 is INVALID_SHARE_SESSION_EPOCH), the acknowledgements,
and for epoch -1 the member's records released. A closing session (either API) releases the
member's acquired records in the session's partitions.
"""

from __future__ import annotations

import uuid

import trio

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.group.share_partition_manager import (
    NOTHING,
    Acquired,
    SharedPartition,
    SharePartitionManager,
)
from raftka.broker.group.share_partition_state import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
)
from raftka.broker.group.share_persister import PersisterError, ShareStateKey
from raftka.broker.group.share_session_state import (
    ContextKind,
    ShareSessionError,
    ShareSessionKey,
    TopicIdPartition,
)
from raftka.broker.net.zero_copy import FileRegion
from raftka.broker.replication.partition import NotLeaderOrFollower
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.codec import Message
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

ShareFetchResponse = response_class(ApiKey.SHARE_FETCH)
ShareAcknowledgeResponse = response_class(ApiKey.SHARE_ACKNOWLEDGE)

RENEW_VERSION = 2  # ShareFetch/ShareAcknowledge v2: AcknowledgeType RENEW and is_renew_ack (KIP-1222)


def _manager(ctx: BrokerContext) -> SharePartitionManager:
    if ctx.shares is None:
        raise RuntimeError("this broker has no share partition manager")
    return ctx.shares


def _names(ctx: BrokerContext, topic_ids) -> dict[uuid.UUID, str]:
    """The names of the topic ids the image knows."""
    image = ctx.image
    out = {}
    for topic_id in topic_ids:
        topic = image.topics.get(str(topic_id))
        if topic is not None:
            out[topic_id] = topic.name
    return out


def _leader(ctx: BrokerContext, name: str | None, index: int) -> tuple[dict, int]:
    """(current_leader, its broker id or -1) from the image, for an answer naming a partition."""
    topic = ctx.image.topic_by_name(name) if name is not None else None
    part = topic.partitions.get(index) if topic is not None else None
    if part is None:
        return {"leader_id": -1, "leader_epoch": -1}, -1
    return {"leader_id": part.leader, "leader_epoch": part.leader_epoch}, part.leader


def _endpoints(ctx: BrokerContext, leaders: set[int]) -> list[dict]:
    """NodeEndpoints for the leaders named in a NOT_LEADER_OR_FOLLOWER answer."""
    out = []
    for broker_id in sorted(leaders):
        endpoint = ctx.replicas.leader_endpoint(broker_id)
        broker = ctx.image.brokers.get(broker_id)
        if endpoint is not None:
            out.append({"node_id": broker_id, "host": endpoint[0], "port": endpoint[1],
                        "rack": broker.rack if broker is not None else None})
    return out


class _Answer:
    """The per-partition entries of one answer, keyed by (topic id, partition)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.entries: dict[TopicIdPartition, dict] = {}
        self.leaders: set[int] = set()

    def entry(self, tp: TopicIdPartition, name: str | None) -> dict:
        found = self.entries.get(tp)
        if found is None:
            leader, _ = _leader(self.ctx, name, tp[1])
            found = self.entries[tp] = {"partition_index": tp[1], "error_code": 0, "error_message": None,
                                        "acknowledge_error_code": 0, "acknowledge_error_message": None,
                                        "current_leader": leader, "records": b"", "acquired_records": []}
        return found

    def error(self, tp: TopicIdPartition, name: str | None, code: int, message: str | None, field: str) -> None:
        entry = self.entry(tp, name)
        entry[field], entry[field.replace("_code", "_message")] = int(code), message
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and entry["current_leader"]["leader_id"] >= 0:
            self.leaders.add(entry["current_leader"]["leader_id"])

    def topics(self, keep=lambda tp, entry: True) -> list[dict]:
        topics: dict[uuid.UUID, list[dict]] = {}
        for tp, entry in self.entries.items():
            if keep(tp, entry):
                topics.setdefault(tp[0], []).append(entry)
        return [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in topics.items()]


def _batches(partition, version: int) -> tuple[list[AcknowledgementBatch], str]:
    """A partition's acknowledgement batches, or why they are malformed for this version."""
    out = []
    for b in partition.acknowledgement_batches:
        types = tuple(b.acknowledge_types)
        if version < RENEW_VERSION and AcknowledgeType.RENEW in types:
            return [], f"acknowledge type 4 (renew) needs version {RENEW_VERSION}, the request is v{version}"
        out.append(AcknowledgementBatch(b.first_offset, b.last_offset, types))
    return out, ""


async def _acknowledge(ctx: BrokerContext, conn, group_id: str, member_id: str, topics, version: int,
                       answer: _Answer, field: str) -> None:
    """Apply the acknowledgements of `topics` (ShareFetch's or ShareAcknowledge's), each
    partition's result in `answer` (`field`: acknowledge_error_code or error_code)."""
    manager = _manager(ctx)
    names = _names(ctx, (t.topic_id for t in topics))
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, names.values())
    for t in topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            tp = (t.topic_id, p.partition_index)
            if name is None:
                answer.error(tp, None, ErrorCode.UNKNOWN_TOPIC_ID, f"topic id {t.topic_id} is not known", field)
                continue
            if name in denied:
                answer.error(tp, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                             f"not authorized to read topic {name!r}", field)
                continue
            batches, malformed = _batches(p, version)
            if malformed:
                answer.error(tp, name, ErrorCode.INVALID_REQUEST, malformed, field)
                continue
            try:
                ctx.replicas.get_leader(name, p.partition_index)
            except Exception as exc:
                answer.error(tp, name, error_code_for(exc), str(exc), field)
                continue
            shared = manager.cached(group_id, name, p.partition_index)
            if shared is None:  # Kafka: the share partition is not in this leader's cache
                answer.error(tp, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"{name}-{p.partition_index} has no share state for group {group_id!r} here", field)
                continue
            error, why = await manager.acknowledge(shared, member_id, batches)
            answer.error(tp, name, error, why or None, field)


async def _release_session(ctx: BrokerContext, session) -> None:
    manager = _manager(ctx)
    await manager.release_member(session.key.group_id, session.key.member_id,
                                 manager.session_partitions(session.partitions))


def _ranges(ranges: tuple[AcquiredRecords, ...], batch_size: int) -> list[dict]:
    """AcquiredRecords entries, none longer than `batch_size` offsets (when it is set)."""
    out = []
    for r in ranges:
        first = r.first_offset
        while first <= r.last_offset:
            last = r.last_offset if batch_size <= 0 else min(r.last_offset, first + batch_size - 1)
            out.append({"first_offset": first, "last_offset": last, "delivery_count": r.delivery_count})
            first = last + 1
    return out


async def _load(ctx: BrokerContext, group_id: str, partitions: tuple[TopicIdPartition, ...], denied, names,
                answer: _Answer) -> list[tuple[TopicIdPartition, SharedPartition]]:
    """The session's share partitions this broker serves; the others' errors go in `answer`."""
    manager = _manager(ctx)
    out = []
    for tp in partitions:
        name = names.get(tp[0])
        if name is None:
            answer.error(tp, None, ErrorCode.UNKNOWN_TOPIC_ID, f"topic id {tp[0]} is not known", "error_code")
        elif name in denied:
            answer.error(tp, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to read topic {name!r}",
                         "error_code")
        else:
            try:
                out.append((tp, await manager.get_or_load(ShareStateKey(group_id, tp[0], tp[1]), name)))
            except PersisterError as exc:
                answer.error(tp, name, exc.code, exc.message or None, "error_code")
            except Exception as exc:
                answer.error(tp, name, error_code_for(exc), str(exc), "error_code")
    return out


async def _fetch(ctx: BrokerContext, request, group_id: str, member_id: str,
                 loaded: list[tuple[TopicIdPartition, SharedPartition]], answer: _Answer, failed: bool) -> None:
    """Acquire records for the member (long-polled); the records and ranges go in `answer`."""
    manager = _manager(ctx)
    read_committed = manager.read_committed(group_id)
    deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000.0
    max_records = request.max_records if request.max_records > 0 else 2**31 - 1
    max_bytes = request.max_bytes if request.max_bytes > 0 else 2**31 - 1

    def fail(tp: TopicIdPartition, shared: SharedPartition, exc: Exception) -> None:
        nonlocal failed
        answer.error(tp, shared.topic, error_code_for(exc), str(exc), "error_code")
        loaded.remove((tp, shared))
        failed = True

    while True:
        for tp, shared in list(loaded):
            if manager.cached(group_id, shared.topic, tp[1]) is not shared:  # leadership moved meanwhile
                fail(tp, shared, NotLeaderOrFollower(f"{shared.topic}-{tp[1]} is no longer led by this broker"))
        ready = [(tp, s) for tp, s in loaded if manager.has_acquirable(s, read_committed)]
        readable = 0
        for tp, shared in list(ready):  # Kafka checks min_bytes against the log before acquiring
            try:
                readable += shared.partition.read(shared.state.next_fetch_offset(), max_bytes,
                                                  read_committed=read_committed).size
            except Exception as exc:  # the log moved or closed under this request
                fail(tp, shared, exc)
                ready.remove((tp, shared))
        expired = trio.current_time() >= deadline
        if ready and (expired or failed or readable >= max(1, request.min_bytes)):
            remaining_bytes, remaining_records, total = max_bytes, max_records, 0
            for tp, shared in ready:
                got: Acquired = NOTHING
                if remaining_records > 0 and remaining_bytes > 0:
                    try:
                        got = await manager.acquire(shared, member_id, remaining_records, remaining_bytes,
                                                    read_committed, first=total == 0)
                    except Exception as exc:
                        fail(tp, shared, exc)
                if got.size and got.info is not None:
                    entry = answer.entry(tp, shared.topic)
                    entry["records"] = FileRegion(got.info.slices)
                    entry["acquired_records"] = _ranges(got.ranges, request.batch_size)
                    remaining_bytes -= got.size
                    total += got.size
                    remaining_records -= sum(r.last_offset - r.first_offset + 1 for r in got.ranges)
            if total or expired or failed:
                return
        elif expired or failed:
            return
        await manager.wait_for_records(deadline)


def _lock_timeout(ctx: BrokerContext, group_id: str) -> int:
    try:
        return int(_manager(ctx).group_config(group_id, "share.record.lock.duration.ms"))
    except (RuntimeError, ValueError):
        return 0


def _refusal(ctx: BrokerContext, conn, request) -> tuple[int, str]:
    if not request.group_id:
        return ErrorCode.INVALID_GROUP_ID, "the group id is empty"
    if not request.member_id:
        return ErrorCode.INVALID_REQUEST, "the member id is empty"
    if ctx.shares is None:
        return ErrorCode.UNSUPPORTED_VERSION, "share groups are not served by this broker"
    code = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    return code, "not authorized to read the group" if code else ""


async def handle_share_fetch(ctx: BrokerContext, header, request, conn=None) -> Message:
    group_id, member_id, version = request.group_id, request.member_id, header.api_version
    lock_ms = _lock_timeout(ctx, group_id)

    def refused(code: int, message: str) -> Message:  # Kafka 4.4 gives no lock timeout then
        return ShareFetchResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                  acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])

    code, message = _refusal(ctx, conn, request)
    if code:
        return refused(code, message)
    manager = _manager(ctx)
    to_fetch = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, index) for t in request.forgotten_topics_data for index in t.partitions]
    acknowledging = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    try:
        context = manager.sessions.new_context(ShareSessionKey(group_id, member_id), request.share_session_epoch,
                                               to_fetch, forgotten, acknowledging,
                                               str(conn.connection_id) if conn is not None else "")
    except ShareSessionError as exc:
        return refused(exc.error_code, str(exc))
    if context.kind is ContextKind.FULL and conn is not None:
        manager.watch_connection(conn)
    answer = _Answer(ctx)
    await _acknowledge(ctx, conn, group_id, member_id, request.topics, version, answer, "acknowledge_error_code")
    acknowledged = set(answer.entries)
    if context.kind is ContextKind.FINAL:
        if context.closed is not None:
            await _release_session(ctx, context.closed)
    elif not (version >= RENEW_VERSION and request.is_renew_ack):
        names = _names(ctx, {tp[0] for tp in context.partitions})
        denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, names.values())
        loaded = await _load(ctx, group_id, context.partitions, denied, names, answer)
        failed = any(e["error_code"] for e in answer.entries.values())
        await _fetch(ctx, request, group_id, member_id, loaded, answer, failed)
        for tp in context.partitions:
            if context.owes(tp):
                answer.entry(tp, names.get(tp[0]))

    def keep(tp: TopicIdPartition, entry: dict) -> bool:
        if not context.include(tp, bool(entry["acquired_records"]), entry["error_code"], tp in acknowledged):
            return False
        context.sent(tp, entry["error_code"])
        return True

    return ShareFetchResponse(throttle_time_ms=0, error_code=0, error_message=None,
                              acquisition_lock_timeout_ms=lock_ms, responses=answer.topics(keep),
                              node_endpoints=_endpoints(ctx, answer.leaders))


async def handle_share_acknowledge(ctx: BrokerContext, header, request, conn=None) -> Message:
    group_id, member_id = request.group_id, request.member_id
    lock_ms = _lock_timeout(ctx, group_id)

    def refused(code: int, message: str) -> Message:
        return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                        acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])

    code, message = _refusal(ctx, conn, request)
    if code:
        return refused(code, message)
    try:
        session, closing = _manager(ctx).sessions.acknowledge_context(ShareSessionKey(group_id, member_id),
                                                                      request.share_session_epoch)
    except ShareSessionError as exc:
        return refused(exc.error_code, str(exc))
    answer = _Answer(ctx)
    await _acknowledge(ctx, conn, group_id, member_id, request.topics, header.api_version, answer, "error_code")
    for t in request.topics:  # every partition named gets an answer, acknowledged or not
        for p in t.partitions:
            answer.entry((t.topic_id, p.partition_index), None)
    if closing:
        await _release_session(ctx, session)
    responses = [{"topic_id": t["topic_id"], "partitions": [
        {"partition_index": e["partition_index"], "error_code": e["error_code"], "error_message": e["error_message"],
         "current_leader": e["current_leader"]} for e in t["partitions"]]} for t in answer.topics()]
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                    acquisition_lock_timeout_ms=lock_ms, responses=responses,
                                    node_endpoints=_endpoints(ctx, answer.leaders))
