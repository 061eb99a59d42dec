"""Produce: decode, authorize, hand the batches to the broker's write path, encode.

The write path itself (validation order, acks, internal topics, KIP-890
verification, the append, the acks=all wait) is the broker's core:
broker/replication/append.py (Kafka's ReplicaManager.appendRecords), and an
acks=all answer waits in the produce purgatory (broker/replication/purgatory.py,
broker/replication/delayed_produce.py) until the high watermark passes its
batches or `timeout_ms` expires (REQUEST_TIMED_OUT). This handler does what
Kafka's KafkaApis does before that: refuse Produce v0-2 (message formats v0/v1,
which raftka does not store), and the ACLs, in this order per partition: WRITE
on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on the
topic (TOPIC_AUTHORIZATION_FAILED). acks=0 gets no response at all (the
dispatcher drops it); acks=1 answers after the local append.

Versions: v10+ answer NOT_LEADER_OR_FOLLOWER (and FENCED_LEADER_EPOCH) with the
partition's current leader and epoch and that leader's endpoint on the request's listener
(KIP-951), so the client need not refresh its metadata first; v11 lets the KIP-890 check
answer TRANSACTION_ABORTABLE; v12 is transaction version 2: the leader adds the
partition to the transaction itself (broker/txn/txn_verification.py).
"""

from __future__ import annotations

from raftka.broker import acl_checks
from raftka.broker.handlers.metadata import live_broker_endpoints
from raftka.broker.replication.delayed_produce import PartitionResponse
from raftka.broker.replication.purgatory import DelayedResponse
from raftka.broker.txn.txn_verification import enabled_verifier, produce_operation
from raftka.client.protocol import ErrorCode, ProduceResponse
from raftka.log.append_origin import AppendOrigin
from raftka.raft_meta.security.acls import AclOperation, ResourceType

MIN_SERVED_VERSION = 3  # v0-2 carry message formats v0/v1, which raftka does not store
FIRST_LEADER_HINT_VERSION = 10  # KIP-951
_LEADER_HINT_ERRORS = (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.FENCED_LEADER_EPOCH))


async def handle(ctx, header, request, conn=None) -> ProduceResponse | DelayedResponse:
    results: dict[tuple[str, int], PartitionResponse | None] = {}
    entries = []
    unsupported = header.api_version < MIN_SERVED_VERSION
    transactional = request.transactional_id is not None
    txn_allowed = transactional and acl_checks.allowed(ctx, conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                       request.transactional_id)
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.WRITE, (t.name for t in request.topic_data))
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            key = (topic.name, pdata.index)
            if unsupported:
                results[key] = PartitionResponse(ErrorCode.UNSUPPORTED_VERSION, error_message=(
                    "produce v0-2 (message format v0/v1) is not supported"))
            elif transactional and not txn_allowed:
                results[key] = PartitionResponse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error_message=(
                    f"not authorized to write as transactional id {request.transactional_id!r}"))
            elif topic.name in denied:
                results[key] = PartitionResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=(
                    f"not authorized to write to topic {topic.name!r}"))
            else:
                results[key] = None  # keeps its place in the answer; the write path fills it
                entries.append((key, pdata.records))
    operation = produce_operation(header.api_version)
    appended = await ctx.replicas.append_records(
        entries, required_acks=request.acks, timeout_ms=request.timeout_ms, origin=AppendOrigin.CLIENT,
        transactional_id=request.transactional_id, verifier=enabled_verifier(ctx, operation),
        txn_operation=operation) if entries else None
    hints = header.api_version >= FIRST_LEADER_HINT_VERSION

    def respond() -> ProduceResponse:
        return _response(results, ctx if hints else None, conn)

    if appended is not None:
        results.update(appended.responses)
        if appended.delayed is not None:
            # The appends are done, in request order; only the wait for the ISR remains, and the
            # connection may process its next requests meanwhile (see broker/net/network.py).
            return DelayedResponse(ctx.replicas.produce_purgatory, appended.delayed, respond)
    return respond()


def _response(results: dict[tuple[str, int], PartitionResponse | None], hint_ctx=None, conn=None) -> ProduceResponse:
    """The answer; with `hint_ctx` (v10+), KIP-951's leader hints from its metadata image."""
    responses: dict[str, list[dict]] = {}
    leaders: set[int] = set()
    for (name, index), result in results.items():
        assert result is not None, f"{name}-{index}: no answer from the write path"
        part = {
            "index": index, "error_code": int(result.error_code), "base_offset": result.base_offset,
            "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
            "record_errors": result.record_errors or [], "error_message": result.error_message}
        if hint_ctx is not None and int(result.error_code) in _LEADER_HINT_ERRORS:
            leader, epoch = _current_leader(hint_ctx.image, name, index)
            part["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
            if leader >= 0:
                leaders.add(leader)
        responses.setdefault(name, []).append(part)
    response = ProduceResponse(
        responses=[{"name": name, "partition_responses": parts} for name, parts in responses.items()],
        throttle_time_ms=0,
    )
    if leaders:
        assert hint_ctx is not None
        response.node_endpoints = [{"node_id": node, "host": host, "port": port, "rack": rack}
                                   for node, host, port, rack in live_broker_endpoints(hint_ctx.image, conn)
                                   if node in leaders]
    return response


def _current_leader(image, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition in the image; (-1, -1) if unknown."""
    meta = image.topic_by_name(topic)
    part = meta.partitions.get(index) if meta is not None else None
    if part is None or part.leader < 0:
        return -1, -1
    return part.leader, part.leader_epoch
