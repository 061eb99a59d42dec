"""The broker's write path (Kafka's ReplicaManager.appendRecords): from a partition's
batches to its answer.

Each partition is checked, verified and appended alone, in request order, and
fails alone; the others still append. The checks, in this order (the first that
fails answers):

1. internal topics (`__consumer_offsets`, `__transaction_state`) take no client
   writes: INVALID_TOPIC_EXCEPTION (the coordinators append with origin
   COORDINATOR);
2. `acks` is 0, 1 or -1, else INVALID_REQUIRED_ACKS;
3. there is a record batch, else INVALID_RECORD;
4. a transactional batch needs the request's transactional id, else
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's rule);
5. a producer's first transactional batch in a partition is verified with the
   transaction coordinator (KIP-890 part 1), or at Produce v12 added to its transaction
   (transaction version 2; broker/txn/txn_verification.py);
6. the append itself (`Partition.append_as_leader`): the leader's errors
   (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS) and the log's, which walks every
   record first (`log.record_validator`): a malformed one fails the partition's
   whole batch set with INVALID_RECORD, naming the record in `record_errors`.

The first batch's header is parsed once here, for steps 4 and 5, and handed to
the log. The authorization checks (ACLs) and the request's version are the
handler's (broker/handlers/produce.py), as in Kafka's KafkaApis.

acks=0 and acks=1 answer after the local append. acks=-1 also waits until the
high watermark passes each write: the result carries a `DelayedProduce`
(broker/replication/delayed_produce.py) for the produce purgatory, with the
request's deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
import trio

from raftka.broker.errors import error_code_for
from raftka.broker.metrics import BrokerMetrics
from raftka.broker.replication.delayed_produce import (
    DelayedProduce,
    PartitionResponse,
    ReplicationWait,
)
from raftka.broker.replication.partition import Partition
from raftka.broker.topic_names import INTERNAL_TOPICS
from raftka.broker.txn.txn_verification import TxnOperation, TxnVerifier, verify_partition
from raftka.client.protocol import ErrorCode
from raftka.log.append_origin import AppendOrigin
from raftka.log.batch_header import BatchHeader, parse_header
from raftka.log.errors import InvalidRecord, LogError

log = structlog.get_logger("broker.produce")

VALID_ACKS = (0, 1, -1)

Records = bytes | bytearray | memoryview


@dataclass
class AppendResult:
    """Each partition's answer by (topic, partition), in request order; `delayed` for acks=-1
    writes still waiting for the ISR (complete it in the produce purgatory before answering)."""

    responses: dict[tuple[str, int], PartitionResponse]
    delayed: DelayedProduce | None = None


def check_partition(topic: str, records: Records | None, header: BatchHeader | None, *, required_acks: int,
                    origin: AppendOrigin, transactional_id: str | None) -> tuple[int, str] | None:
    """Steps 1-4 (no I/O): None to go on, else (error code, message) for the partition."""
    if origin is AppendOrigin.CLIENT and topic in INTERNAL_TOPICS:
        return int(ErrorCode.INVALID_TOPIC_EXCEPTION), f"cannot append to internal topic {topic}"
    if required_acks not in VALID_ACKS:
        return int(ErrorCode.INVALID_REQUIRED_ACKS), f"acks={required_acks}; expected 0, 1 or -1"
    if records is None or len(records) == 0:
        return int(ErrorCode.INVALID_RECORD), "no record batch in the request"
    if transactional_id is None and header is not None and header.is_transactional:
        return int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "transactional batch without a transactional id"
    return None


def first_header(records: Records | None) -> BatchHeader | None:
    """The first batch's header (Produce v3+ carries exactly one batch), or None if there is
    none or it is malformed: the log's own validation refuses a malformed one."""
    if not records:
        return None
    try:
        return parse_header(records)
    except LogError:
        return None


async def append_records(leader_for: Callable[[str, int], Partition],
                         entries: Sequence[tuple[tuple[str, int], Records | None]], *, required_acks: int,
                         timeout_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT,
                         transactional_id: str | None = None, verifier: TxnVerifier | None = None,
                         metrics: BrokerMetrics | None = None,
                         txn_operation: TxnOperation = TxnOperation.DEFAULT_ERROR) -> AppendResult:
    """Check, verify and append each partition's batches as leader (`leader_for(topic, index)`
    raises the errors for a partition this broker does not lead). `verifier`: None when
    KIP-890 verification is off; `txn_operation`: what the request's version asks of it."""
    if origin is AppendOrigin.REPLICATION:
        raise ValueError("append_records appends as leader; replicated batches go through append_as_follower")
    responses: dict[tuple[str, int], PartitionResponse] = {}
    waits: list[ReplicationWait] = []
    for key, records in entries:
        topic, index = key
        header = first_header(records)
        refusal = check_partition(topic, records, header, required_acks=required_acks, origin=origin,
                                  transactional_id=transactional_id)
        if refusal is not None:
            responses[key] = PartitionResponse(error_code=refusal[0], error_message=refusal[1])
            if refusal[0] == ErrorCode.INVALID_TOPIC_EXCEPTION:
                log.info("produce.rejected", topic=topic, partition=index, error_code=refusal[0],
                         error="internal topic")
            continue
        assert records is not None  # check_partition refuses a partition without records
        if transactional_id is not None:
            code = await _verify(verifier, leader_for, key, transactional_id, header, txn_operation)
            if code:
                responses[key] = PartitionResponse(error_code=code, error_message=(
                    f"transactional write to {topic}-{index} not verified with the transaction coordinator "
                    f"(KIP-890)"))
                if metrics is not None:
                    metrics.produce_failed(topic)
                continue
        try:
            partition = leader_for(topic, index)
            info = partition.append_as_leader(records, required_acks, origin=origin, first_header=header)
        except Exception as exc:  # each partition fails alone; the others still append
            code = error_code_for(exc)
            responses[key] = PartitionResponse(error_code=code, error_message=str(exc),
                                               record_errors=_record_errors(exc))
            if metrics is not None:
                metrics.produce_failed(topic)
            log.info("produce.rejected", topic=topic, partition=index, error_code=code, error=str(exc))
            continue
        response = responses[key] = PartitionResponse(0, info.first_offset, info.log_append_time,
                                                      info.log_start_offset)
        if not info.duplicate and metrics is not None:
            metrics.produced(topic, info.last_offset - info.first_offset + 1, len(records))
        if required_acks == -1:
            waits.append(ReplicationWait(partition, info.last_offset + 1, partition.leader_epoch, response))
    if not waits:
        return AppendResult(responses)
    # The request's timeout runs from here, however long the answer then waits behind
    # earlier ones on the same connection.
    return AppendResult(responses, DelayedProduce(waits, trio.current_time() + timeout_ms / 1000.0))


async def _verify(verifier: TxnVerifier | None, leader_for: Callable[[str, int], Partition], key: tuple[str, int],
                  transactional_id: str, header: BatchHeader | None, operation: TxnOperation) -> int:
    """Step 5: 0 to append, else the Produce error. Any problem finding the partition or
    reading the batch is left to the append to report."""
    if verifier is None or header is None or not header.is_transactional:
        return 0
    try:
        partition = leader_for(*key)
    except Exception:
        return 0
    return await verify_partition(verifier, partition, transactional_id, header.producer_id, header.producer_epoch,
                                  operation)


def _record_errors(exc: Exception) -> list[dict]:
    """Produce v8+ `record_errors`: the record an InvalidRecord blames, if it blames one."""
    index = exc.record_index if isinstance(exc, InvalidRecord) else None
    if index is None:
        return []
    return [{"batch_index": index, "batch_index_error_message": str(exc)}]
