"""Produce: validate headers, CRC and records, assign offsets, append; acks=all waits for the ISR.

The leader's log walks every record before it stores a batch
(`log.record_validator`, the one exception to docs/design.md principle 2): a malformed
one fails the partition's whole batch set with INVALID_RECORD, and Produce v8+
names the record in `record_errors`. Internal topics (`__consumer_offsets`,
`__transaction_state`) take no client writes: INVALID_TOPIC_EXCEPTION, as in
Kafka; the group coordinator appends to its partitions directly, not through
this API. Transactional batches (KIP-98) need the request's `transactional_id`
and its WRITE ACL (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise); the log
refuses a plain batch from a producer whose transaction is open (INVALID_TXN_STATE).
A producer's first transactional batch in a partition is verified with the
transaction coordinator first (KIP-890 part 1, broker/txn/txn_verification.py).
acks=0 gets no response at all (the dispatcher drops it); acks=1
answers after the local append; acks=-1 waits in "purgatory" until the high
watermark passes the batch or `timeout_ms` expires (REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker.errors import error_code_for
from raftka.broker.topic_names import INTERNAL_TOPICS
from raftka.client.protocol import ErrorCode, ProduceResponse
from raftka.log.batch_header import parse_header
from raftka.log.errors import InvalidRecord, LogError
from raftka.raft_meta.security.acls import AclOperation, ResourceType

log = structlog.get_logger("broker.produce")

MIN_SERVED_VERSION = 3  # v0-2 carry message formats v0/v1, which raftka does not store


def _partition_result(index: int, code: int, base_offset: int = -1, log_append_time: int = -1,
                      log_start_offset: int = -1, message: str | None = None,
                      record_errors: list[dict] | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": base_offset,
            "log_append_time_ms": log_append_time, "log_start_offset": log_start_offset,
            "record_errors": record_errors or [], "error_message": message}


def _record_errors(exc: Exception) -> list[dict]:
    """Produce v8+ `record_errors`: the record an InvalidRecord blames, if it blames one."""
    index = exc.record_index if isinstance(exc, InvalidRecord) else None
    if index is None:
        return []
    return [{"batch_index": index, "batch_index_error_message": str(exc)}]


async def handle(ctx, header, request, conn=None) -> ProduceResponse:
    acks = request.acks
    results: dict[tuple[str, int], dict] = {}
    waits = []
    unsupported = header.api_version < MIN_SERVED_VERSION
    transactional = request.transactional_id is not None
    txn_allowed = transactional and acl_checks.allowed(ctx, conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                       request.transactional_id)
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.WRITE, (t.name for t in request.topic_data))
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            key = (topic.name, pdata.index)
            if unsupported:
                results[key] = _partition_result(pdata.index, ErrorCode.UNSUPPORTED_VERSION,
                                                 message="produce v0-2 (message format v0/v1) is not supported")
                continue
            if transactional and not txn_allowed:
                results[key] = _partition_result(pdata.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                 message=f"not authorized to write as transactional id "
                                                         f"{request.transactional_id!r}")
                continue
            if topic.name in denied:
                results[key] = _partition_result(pdata.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                 message=f"not authorized to write to topic {topic.name!r}")
                continue
            if topic.name in INTERNAL_TOPICS:
                results[key] = _partition_result(pdata.index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                 message=f"cannot append to internal topic {topic.name}")
                log.info("produce.rejected", topic=topic.name, partition=pdata.index,
                         error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), error="internal topic")
                continue
            if acks not in (0, 1, -1):
                results[key] = _partition_result(pdata.index, ErrorCode.INVALID_REQUIRED_ACKS,
                                                 message=f"acks={acks}; expected 0, 1 or -1")
                continue
            if pdata.records is None or len(pdata.records) == 0:
                results[key] = _partition_result(pdata.index, ErrorCode.INVALID_RECORD,
                                                 message="no record batch in the request")
                continue
            if not transactional and _has_transactional_batch(pdata.records):
                # Kafka's rule: transactional records need a transactional id (and its WRITE ACL).
                results[key] = _partition_result(pdata.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                 message="transactional batch without a transactional id")
                continue
            if transactional:
                code = await _verify_transaction(ctx, request.transactional_id, topic.name, pdata)
                if code:
                    results[key] = _partition_result(pdata.index, code, message=(
                        f"transactional write to {topic.name}-{pdata.index} not verified with the "
                        f"transaction coordinator (KIP-890)"))
                    ctx.metrics.produce_failed(topic.name)
                    continue
            try:
                partition = ctx.replicas.get_leader(topic.name, pdata.index)
                info = partition.append_as_leader(pdata.records, acks)
            except Exception as exc:  # each partition fails alone; the others still append
                code = error_code_for(exc)
                results[key] = _partition_result(pdata.index, code, message=str(exc),
                                                 record_errors=_record_errors(exc))
                ctx.metrics.produce_failed(topic.name)
                log.info("produce.rejected", topic=topic.name, partition=pdata.index, error_code=code,
                         error=str(exc))
                continue
            results[key] = _partition_result(pdata.index, 0, info.first_offset, info.log_append_time,
                                             info.log_start_offset)
            if not info.duplicate:
                ctx.metrics.produced(topic.name, info.last_offset - info.first_offset + 1, len(pdata.records))
            if acks == -1:
                waits.append((key, partition, info.last_offset + 1))
    if waits:
        # The appends are done, in request order; only the wait for the ISR remains, and the
        # connection may process its next requests meanwhile (see broker/net/network.py).
        return ReplicationWait(results, waits, request.timeout_ms / 1000.0)
    return _response(results)


async def _verify_transaction(ctx, transactional_id: str, topic: str, pdata) -> int:
    """KIP-890 part 1 (broker/txn/txn_verification.py): 0 to append, else the Produce error.
    Only a producer's first transactional batch where it has no open transaction is asked
    about; any problem finding the partition is left to the append to report."""
    verifier = getattr(ctx, "txn_verifier", None)
    if verifier is None or not ctx.config.transaction_partition_verification_enable:
        return 0
    try:
        header = parse_header(pdata.records)
        partition = ctx.replicas.get_leader(topic, pdata.index)
    except Exception:
        return 0
    if not header.is_transactional or partition.in_transaction(header.producer_id):
        return 0
    guard = partition.verification_guard(header.producer_id)
    code = await verifier.verify(transactional_id, header.producer_id, header.producer_epoch, topic, pdata.index)
    if code == 0 and not partition.guard_holds(header.producer_id, guard):
        code = int(ErrorCode.INVALID_TXN_STATE)  # a marker landed meanwhile: that answer is void
    return code


def _has_transactional_batch(records) -> bool:
    """Whether the first batch is transactional (Produce v3+ carries exactly one batch; a
    malformed one is refused by the log's own validation)."""
    try:
        return parse_header(records).is_transactional
    except LogError:
        return False


def _response(results: dict[tuple[str, int], dict]) -> ProduceResponse:
    responses: dict[str, list[dict]] = {}
    for (name, _index), result in results.items():
        responses.setdefault(name, []).append(result)
    return ProduceResponse(
        responses=[{"name": name, "partition_responses": parts} for name, parts in responses.items()],
        throttle_time_ms=0,
    )


class ReplicationWait:
    """An acks=all produce whose batches are appended and now wait for the high watermark."""

    def __init__(self, results: dict, waits: list, timeout_s: float) -> None:
        self.results, self.waits = results, waits
        # The request's timeout runs from its arrival, however long the response waits
        # behind earlier ones on the same connection.
        self.deadline = trio.current_time() + timeout_s

    async def finish(self) -> ProduceResponse:
        await _wait_for_replication(self.results, self.waits, self.deadline)
        return _response(self.results)


async def _wait_for_replication(results: dict, waits: list, deadline: float) -> None:
    # One after another against one deadline: the high watermarks advance concurrently
    # anyway, so this ends when the slowest partition is replicated (or the deadline
    # passes), as concurrent waits would, without a task and a nursery per request.
    for key, partition, offset in waits:
        try:
            await partition.wait_for_high_watermark(offset, deadline)
        except Exception as exc:
            result = results[key]
            result["error_code"] = error_code_for(exc)
            result["error_message"] = str(exc)
