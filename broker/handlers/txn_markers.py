"""WriteTxnMarkers (the transaction coordinator, or an admin's forced abort) and DescribeProducers.

WriteTxnMarkers v0-2 needs CLUSTER_ACTION on the cluster (31 otherwise). For each
marker and each partition this broker leads, the leader appends a COMMIT/ABORT
control batch (log.control_record) and answers once the high watermark passes it,
as an acks=all write: per partition 3 (unknown), 6 (not the leader), 19/20 (ISR
too small), 7 (not replicated in time), 47 (an epoch older than the producer's; from
v2, for a marker of transaction version 2, not newer: KIP-1228's check of late markers),
52 (a coordinator epoch older than the last marker's). The coordinator retries
all but 47/52. A marker that lands in a `__consumer_offsets` partition then
resolves the producer's pending transactional offsets there (commit: visible to
OffsetFetch; abort: dropped).

DescribeProducers v0 (KIP-664, READ on the topic): the producer state of each partition,
open transactions included. As in Kafka (ReplicaManager.activeProducerState), any replica
answers from its own log's producer state, a follower's included (`kafka-transactions
find-hanging --broker-id N` asks broker N about every partition it hosts); a broker that
does not host the partition answers NOT_LEADER_OR_FOLLOWER, an unknown one 3.
"""

from __future__ import annotations

import structlog
import trio

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.broker.group.group_metadata_manager import OFFSETS_TOPIC
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.txn_markers")

# Kafka writes markers with the broker's request.timeout.ms (30 s) as the acks=all deadline.
MARKER_TIMEOUT_S = 30.0

WriteTxnMarkersResponse = response_class(ApiKey.WRITE_TXN_MARKERS)
DescribeProducersResponse = response_class(ApiKey.DESCRIBE_PRODUCERS)


async def handle_write_txn_markers(ctx: BrokerContext, header, request, conn=None):
    allowed = acl_checks.cluster_allowed(ctx, conn, AclOperation.CLUSTER_ACTION)
    deadline = trio.current_time() + MARKER_TIMEOUT_S
    answers = []
    waits = []  # (result dict, partition, end offset, producer id, commit)
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            parts = []
            for index in topic.partition_indexes:
                result = {"partition_index": index, "error_code": 0}
                parts.append(result)
                if not allowed:
                    result["error_code"] = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    continue
                try:
                    partition = ctx.replicas.get_leader(topic.name, index)
                    info = partition.append_marker_as_leader(
                        marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                        marker.transaction_result, marker.transaction_version if header.api_version >= 2 else 0)
                except Exception as exc:
                    result["error_code"] = error_code_for(exc)
                    log.info("txn_marker.rejected", topic=topic.name, partition=index,
                             producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                             coordinator_epoch=marker.coordinator_epoch, error_code=result["error_code"],
                             error=str(exc))
                    continue
                waits.append((result, partition, info.last_offset + 1, marker.producer_id,
                              marker.transaction_result))
            topics.append({"name": topic.name, "partitions": parts})
        answers.append({"producer_id": marker.producer_id, "topics": topics})
    # One deadline for all: the high watermarks advance concurrently (see produce.py).
    for result, partition, end, producer_id, commit in waits:
        try:
            await partition.wait_for_high_watermark(end, deadline)
        except Exception as exc:
            result["error_code"] = error_code_for(exc)
            continue
        if partition.topic == OFFSETS_TOPIC and ctx.groups is not None:
            ctx.groups.complete_transaction(partition.index, producer_id, commit, end - 1)
    return WriteTxnMarkersResponse(markers=answers)


async def handle_describe_producers(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        parts = []
        for index in topic.partition_indexes:
            result = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
            parts.append(result)
            try:
                if topic.name in denied:
                    raise acl_checks.topic_denied_error(topic.name)
                partition = ctx.replicas.get(topic.name, index)
            except Exception as exc:
                result["error_code"] = error_code_for(exc)
                result["error_message"] = str(exc)
                continue
            result["active_producers"] = [
                {"producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_sequence,
                 "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": e.current_txn_first_offset}
                for e in partition.log.producer_state.producers().values()]
        topics.append({"name": topic.name, "partitions": parts})
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
