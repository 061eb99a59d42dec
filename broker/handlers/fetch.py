"""Fetch: whole batches as byte ranges of segment files, long-polled.

Consumers (replica_id < 0) read only below the high watermark. A follower
(replica_id = its broker id) reads up to the log end, and its fetch offset
tells the leader how far its log reaches (which advances the high watermark
and keeps it in the ISR). The response is built, and if it holds fewer than
`min_bytes` and no error, the request waits (up to `max_wait_ms`) for a
high-watermark move (consumers) or an append (followers), then is built
again.

Followers may use incremental fetch sessions (broker/replication/fetch_session_state.py): the
leader then remembers every partition of the session and the follower's
position in it, updates the follower state of all of them on each fetch
(the ISR needs that), and answers only for partitions with news. Consumers
get session_id 0: no session, full fetches, as before.

v13+ name topics by id (librdkafka 2.x uses them once Metadata gives ids): the
ids are resolved to names from the image first, and an id it does not know
(a deleted or re-created topic) gets UNKNOWN_TOPIC_ID, so the client refreshes
its metadata instead of reading the new topic at the old one's offsets. v15+
carry a follower's id in ReplicaState. `last_fetched_epoch` (v12+, follower
divergence) is not acted on: raftka's own followers fetch with v11 and
truncate through OffsetsForLeaderEpoch.

isolation_level 1 (read_committed) serves whole batches below the last stable
offset only, and `aborted_transactions` (from the `.txnindex` files) for the
range returned; isolation 0 leaves it null, aborted data included, as Kafka.
"""

from __future__ import annotations

import uuid

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.handlers.metadata import ZERO_UUID, topic_uuid
from raftka.broker.net.zero_copy import FileRegion
from raftka.broker.replication import replica_selector
from raftka.broker.replication.fetch_session_state import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SessionError,
    SessionPartition,
)
from raftka.client.protocol import ErrorCode, FetchResponse

log = structlog.get_logger("broker.fetch")


def _from_request(request) -> list[SessionPartition]:
    """A sessionless fetch's partitions (the same record type, kept for this request only)."""
    return [SessionPartition(t.topic, p.partition, p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                             p.current_leader_epoch)
            for t in request.topics for p in t.partitions]


def _open_session(ctx, request, now: float):
    """(session or None, partitions to answer for, keys the request listed, incremental?).

    Raises SessionError."""
    sessions = ctx.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    if request.replica_id < 0 or epoch == FINAL_EPOCH:
        if session_id and request.replica_id >= 0:
            sessions.remove(session_id)  # epoch -1: the follower closes its session
        elif session_id:
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                               f"fetch session {session_id}: sessions are kept for followers only")
        return None, _from_request(request), frozenset(), False
    if epoch == INITIAL_EPOCH:
        if session_id:
            sessions.remove(session_id)
        session = sessions.create(request.replica_id, now)
        log.info("fetch_session.created", session_id=session.session_id, replica_id=request.replica_id,
                 partitions=sum(len(t.partitions) for t in request.topics), sessions=len(sessions))
        incremental = False
    else:
        session = sessions.lookup(session_id, epoch, request.replica_id, now)
        incremental = True
    listed = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.topic, p.partition)
            listed.add(key)
            known = session.partitions.get(key)
            if known is None:
                session.partitions[key] = SessionPartition(t.topic, p.partition, p.fetch_offset, p.log_start_offset,
                                                           p.partition_max_bytes, p.current_leader_epoch)
            else:
                known.update(p.fetch_offset, p.log_start_offset, p.partition_max_bytes, p.current_leader_epoch)
    for t in request.forgotten_topics_data or ():
        for index in t.partitions:
            session.partitions.pop((t.topic, index), None)
    return session, list(session.partitions.values()), listed, incremental


# How stale the leader's record of a follower's unchanged, caught-up position may get before
# an idle session partition is recorded again (keeps it in the ISR; replica.lag.time.max.ms
# is tens of seconds).
IDLE_RECORD_INTERVAL_S = 0.5


def _idle(sp: SessionPartition, record_follower: bool, ctx, replica_id: int, now: float) -> bool:
    """True if `sp`, a session partition the request did not list, has no news for its
    follower and is handled here without a lookup or a read: its position is the
    leader's log end, and the high watermark and log start are the ones last sent.
    Most partitions of a session are."""
    p = sp.leader
    if (p is None or not p.is_leader or p.leader_epoch != sp.leader_epoch
            or ctx.replicas.partitions.get((sp.topic, sp.partition)) is not p):  # deleted and re-created
        return False
    if (p.log.log_end_offset != sp.fetch_offset or p.high_watermark != sp.sent_high_watermark
            or p.log.log_start_offset != sp.sent_log_start_offset):
        return False
    if record_follower and (now - sp.recorded_at > IDLE_RECORD_INTERVAL_S or replica_id not in p.isr):
        try:
            ctx.replicas.record_follower_fetch(p, replica_id, sp.fetch_offset)
        except Exception:
            return False  # the full path answers with the error (e.g. no longer a replica)
        sp.recorded_at = now
    return True


def _consumer_replica(ctx, w: SessionPartition, client_rack: str | None):
    """(the local replica a consumer reads, preferred read replica) — KIP-392. `client_rack`
    None: a Fetch below v11, which only leaders serve."""
    partition = ctx.replicas.get(w.topic, w.partition)
    if client_rack is None or partition.is_leader:
        partition.check_leader(w.current_leader_epoch)
        if client_rack and ctx.config.replica_selector_class == replica_selector.RACK_AWARE_SELECTOR:
            image = ctx.image

            def rack_of(broker: int) -> str | None:
                b = image.brokers.get(broker)
                return b.rack if b is not None and not b.fenced else None

            ends = {r: f.log_end_offset for r, f in partition.followers.items()}
            return partition, replica_selector.preferred_read_replica(
                client_rack, partition.leader, partition.isr, ends, w.fetch_offset, rack_of)
        return partition, replica_selector.NO_PREFERRED_REPLICA
    partition.check_follower_epoch(w.current_leader_epoch)  # a follower serves v11+ consumers
    return partition, replica_selector.NO_PREFERRED_REPLICA


def _build(ctx, request, wanted: list[SessionPartition], listed, record_follower: bool, incremental: bool,
           denied: frozenset[str] = frozenset(), client_rack: str | None = None):
    """(topic responses, total record bytes, any error, session updates to commit if sent).

    `incremental`: `wanted` are a session's partitions and the response names only those
    with news; `listed` are the keys this request named (their positions may have moved)."""
    follower = request.replica_id >= 0
    read_committed = not follower and request.isolation_level == READ_COMMITTED
    remaining = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    total = 0
    any_error = False
    topics: dict[str, list[dict]] = {}
    sent: list[tuple[SessionPartition, int, int]] = []
    now = trio.current_time()
    for w in wanted:
        if (incremental and follower and (w.topic, w.partition) not in listed
                and _idle(w, record_follower, ctx, request.replica_id, now)):
            continue
        entry = {"partition_index": w.partition, "error_code": 0, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                 "preferred_read_replica": -1, "records": b""}
        has_records = False
        try:
            if w.topic in denied:
                raise acl_checks.topic_denied_error(w.topic)
            if follower:
                partition = ctx.replicas.get_leader(w.topic, w.partition, w.current_leader_epoch)
                partition.update_follower_log_start(request.replica_id, w.log_start_offset)
            else:
                partition, preferred = _consumer_replica(ctx, w, client_rack)
                if preferred != replica_selector.NO_PREFERRED_REPLICA:  # no records: go there
                    entry["preferred_read_replica"] = preferred
                    entry["high_watermark"] = entry["last_stable_offset"] = partition.high_watermark
                    entry["log_start_offset"] = partition.log.log_start_offset
                    sent.append((w, entry["high_watermark"], entry["log_start_offset"]))
                    topics.setdefault(w.topic, []).append(entry)
                    any_error = True  # answer at once, as for an error: nothing to wait for
                    continue
            if follower and record_follower:
                ctx.replicas.record_follower_fetch(partition, request.replica_id, w.fetch_offset)
                w.recorded_at = now
            w.leader, w.leader_epoch = partition, partition.leader_epoch
            entry["high_watermark"] = partition.high_watermark
            entry["last_stable_offset"] = partition.last_stable_offset
            entry["log_start_offset"] = partition.log.log_start_offset
            if read_committed:
                entry["aborted_transactions"] = []
            # Nothing to read at the end of what this fetcher may see (the idle partitions of
            # a session, mostly): skip the read.
            readable_end = (partition.log.log_end_offset if follower
                            else entry["last_stable_offset"] if read_committed else partition.high_watermark)
            if not follower and not partition.is_leader and readable_end < w.fetch_offset:
                pass  # a follower behind the consumer's position (KIP-392): nothing yet, no error
            elif (follower and partition.log.log_start_offset <= w.fetch_offset < readable_end
                  and ctx.replicas.quotas.leader_throttles(ctx.image, w.topic, w.partition, partition.isr,
                                                           request.replica_id, now)):
                pass  # over leader.replication.throttled.rate: no records this time (KIP-73)
            elif remaining > 0 and w.fetch_offset != readable_end:
                # The first partition with data may exceed max_bytes by one batch (Kafka's rule).
                limit = min(w.partition_max_bytes, remaining)
                info = partition.read(w.fetch_offset, limit, committed_only=not follower,
                                      read_committed=read_committed)
                if info.size and (total == 0 or info.size <= limit):
                    entry["records"] = FileRegion(info.slices)  # sent with sendfile
                    remaining -= info.size
                    total += info.size
                    has_records = True
                    if read_committed:
                        entry["aborted_transactions"] = _aborted(partition, w.fetch_offset, info.next_offset)
            elif not (partition.log.log_start_offset <= w.fetch_offset <= partition.log.log_end_offset):
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        except Exception as exc:
            entry["error_code"] = error_code_for(exc)
        if entry["error_code"]:
            any_error = True
        if incremental and not (has_records or entry["error_code"]
                                or w.changed_since_sent(entry["high_watermark"], entry["log_start_offset"])):
            continue  # no news for this partition: an incremental response leaves it out
        sent.append((w, entry["high_watermark"], entry["log_start_offset"]))
        topics.setdefault(w.topic, []).append(entry)
    return [{"topic": name, "partitions": parts} for name, parts in topics.items()], total, any_error, sent


READ_COMMITTED = 1  # isolation_level


def _aborted(partition, fetch_offset: int, upper_bound: int) -> list[dict]:
    """read_committed: the aborted transactions overlapping [fetch_offset, upper_bound), from
    the partition's `.txnindex` files; the client skips their producers' batches."""
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in partition.log.collect_aborted_txns(fetch_offset, upper_bound)]


TOPIC_IDS_VERSION = 13  # v13+ name topics by id (KIP-516)
REPLICA_STATE_VERSION = 15  # v15+ carry the follower's id in the tagged ReplicaState (KIP-903)


def _resolve_topic_ids(ctx, request) -> tuple[dict[str, uuid.UUID], list]:
    """v13+: name each requested topic from its id in the image, in place (the rest of this
    module works on names). Returns (the id each resolved name was asked by, the request's
    topics whose id the image does not know: they are answered UNKNOWN_TOPIC_ID, so a
    client still fetching a deleted or re-created topic learns it)."""
    image = ctx.image
    ids: dict[str, uuid.UUID] = {}
    unknown = []
    known = []
    for t in request.topics:
        topic = image.topics.get(str(t.topic_id))
        if topic is None:
            unknown.append(t)
            continue
        t.topic = topic.name
        ids[topic.name] = t.topic_id
        known.append(t)
    request.topics = known
    forgotten = []
    for t in request.forgotten_topics_data or ():
        topic = image.topics.get(str(t.topic_id))
        if topic is not None:
            t.topic = topic.name
            forgotten.append(t)
    request.forgotten_topics_data = forgotten
    return ids, unknown


def _unknown_topic_entries(unknown) -> list[dict]:
    return [{"topic": "", "topic_id": t.topic_id, "partitions": [
        {"partition_index": p.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "high_watermark": -1,
         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
         "preferred_read_replica": -1, "records": b""} for p in t.partitions]} for t in unknown]


async def handle(ctx: BrokerContext, header, request, conn=None) -> FetchResponse:
    if header.api_version >= REPLICA_STATE_VERSION:
        request.replica_id = request.replica_state.replica_id
    ids: dict[str, uuid.UUID] = {}
    unknown = []
    if header.api_version >= TOPIC_IDS_VERSION:
        ids, unknown = _resolve_topic_ids(ctx, request)
    response = await _handle(ctx, header, request, conn)
    if header.api_version >= TOPIC_IDS_VERSION:
        image = ctx.image
        for entry in response.responses:
            topic_id = ids.get(entry.topic)
            if topic_id is None:  # a session partition this request did not name
                topic = image.topic_by_name(entry.topic)
                topic_id = topic_uuid(topic) if topic is not None else ZERO_UUID
            entry.topic_id = topic_id
        if unknown:
            response = FetchResponse(throttle_time_ms=0, error_code=response.error_code,
                                     session_id=response.session_id,
                                     responses=[*response.responses, *_unknown_topic_entries(unknown)])
    return response


async def _handle(ctx: BrokerContext, header, request, conn=None) -> FetchResponse:
    now = trio.current_time()
    try:
        session, wanted, listed, incremental = _open_session(ctx, request, now)
    except SessionError as exc:
        return FetchResponse(throttle_time_ms=0, error_code=exc.error_code, session_id=0, responses=[])
    deadline = now + max(0, request.max_wait_ms) / 1000.0
    follower = request.replica_id >= 0
    client_rack = getattr(request, "rack_id", "") if header.api_version >= 11 else None  # KIP-392
    denied = acl_checks.fetch_denied(ctx, conn, follower, {w.topic for w in wanted})
    first = True
    while True:
        # Taken before reading, so no wake-up is missed.
        event = ctx.replicas.append_event() if follower else ctx.replicas.data_event()
        topics, total, any_error, sent = _build(ctx, request, wanted, listed, first, incremental, denied,
                                                client_rack)
        first = False
        if total >= request.min_bytes or any_error or trio.current_time() >= deadline:
            break
        with trio.move_on_at(deadline):
            await event.wait()
    _count(ctx.metrics, topics, follower)
    if follower:
        ctx.replicas.quotas.record_leader_response(ctx.image, (
            (t["topic"], e["partition_index"], len(e["records"]) if e["records"] is not None else 0)
            for t in topics for e in t["partitions"]), trio.current_time())
    if session is not None:
        for sp, high_watermark, log_start_offset in sent:  # what this session's follower now knows
            sp.sent_high_watermark, sp.sent_log_start_offset = high_watermark, log_start_offset
    return FetchResponse(throttle_time_ms=0, error_code=0,
                         session_id=session.session_id if session is not None else 0, responses=topics)


def _count(metrics, topics: list[dict], follower: bool) -> None:
    """Bytes out (consumers) or replication bytes out (followers), and failed partitions."""
    for topic in topics:
        for entry in topic["partitions"]:
            if entry["error_code"]:
                metrics.fetch_failed(topic["topic"])
            records = entry["records"]
            size = len(records) if records is not None else 0
            if size:
                metrics.fetched(topic["topic"], size, follower=follower)
