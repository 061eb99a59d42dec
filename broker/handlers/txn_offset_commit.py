"""TxnOffsetCommit v0-5: a transactional producer's consumed offsets (send_offsets_to_transaction).

Sent to the group's coordinator after AddOffsetsToTxn. ACLs as in Kafka: WRITE on
the transactional id (53), READ on the group (30), READ on each topic (29). The
offsets are validated against the group (KIP-447 fencing with v3's generation,
member and instance ids), written as one transactional batch of the producer to
the group's `__consumer_offsets` partition, and held pending until the
producer's marker lands there (broker/group/txn_offsets_state.py). The partition is first
verified with the transaction coordinator (KIP-890 part 1, as a Produce: it must
have been added by AddOffsetsToTxn). v0-1 get
COORDINATOR_NOT_AVAILABLE where later versions get COORDINATOR_LOAD_IN_PROGRESS. v4 may
answer TRANSACTION_ABORTABLE (not added) where v0-3 get INVALID_TXN_STATE; v5 is
transaction version 2: no AddOffsetsToTxn comes first, the partition is added here
(Kafka's implicit AddOffsetsToTxn).
"""

from __future__ import annotations

import time

from raftka.broker import acl_checks
from raftka.broker.group.group_metadata_manager import OFFSETS_TOPIC
from raftka.broker.group.group_state import CommittedOffset
from raftka.broker.txn.txn_verification import (
    TxnOperation,
    enabled_verifier,
    txn_offset_commit_operation,
    verify_partition,
)
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation, ResourceType

TxnOffsetCommitResponse = response_class(ApiKey.TXN_OFFSET_COMMIT)


async def _verify(ctx, request, operation: TxnOperation) -> int:
    """KIP-890 for the group's `__consumer_offsets` partition, as for a Produce
    (broker/txn/txn_verification.py): 0, or the error for every offset. NOT_ENOUGH_REPLICAS
    becomes COORDINATOR_NOT_AVAILABLE, Kafka's mapping for offset writes (clients retry)."""
    verifier = enabled_verifier(ctx, operation)
    if verifier is None:
        return 0
    try:
        index = ctx.groups.partition_for(request.group_id)
    except Exception:
        return 0  # the commit itself answers (e.g. the offsets topic does not exist yet)
    partition = ctx.replicas.partitions.get((OFFSETS_TOPIC, index))
    if partition is None or not partition.is_leader:
        return 0
    code = await verify_partition(verifier, partition, request.transactional_id, request.producer_id,
                                  request.producer_epoch, operation)
    return int(ErrorCode.COORDINATOR_NOT_AVAILABLE) if code == ErrorCode.NOT_ENOUGH_REPLICAS else code


async def handle(ctx, header, request, conn=None):
    now = int(time.time() * 1000)
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    codes: dict[tuple[str, int], int] = {}
    image = ctx.image
    for t in request.topics:
        topic = image.topic_by_name(t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if topic is None or p.partition_index not in topic.partitions:
                codes[key] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            offsets[key] = CommittedOffset(p.committed_offset, p.committed_leader_epoch,
                                           p.committed_metadata or "", now)
    refused = 0
    if not acl_checks.allowed(ctx, conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                              request.transactional_id):
        refused = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        refused = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if refused:
        codes = dict.fromkeys([*offsets, *codes], refused)
        offsets = {}
    else:
        denied = acl_checks.topics_denied(ctx, conn, AclOperation.READ, (t.name for t in request.topics))
        for key in [k for k in [*offsets, *codes] if k[0] in denied]:
            offsets.pop(key, None)
            codes[key] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    verified = await _verify(ctx, request, txn_offset_commit_operation(header.api_version)) if offsets else 0
    if verified:
        codes.update(dict.fromkeys(offsets, verified))
        offsets = {}
    if offsets:
        version = header.api_version
        results = await ctx.groups.txn_commit(
            request.group_id, request.producer_id, request.producer_epoch,
            request.member_id if version >= 3 else "", request.generation_id if version >= 3 else -1,
            request.group_instance_id if version >= 3 else None, offsets, api_version=version)
        if version < 2:
            results = {k: (int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                           if c == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else c) for k, c in results.items()}
        codes.update(results)
    topics: dict[str, list[dict]] = {}
    for (name, index), code in codes.items():
        topics.setdefault(name, []).append({"partition_index": index, "error_code": code})
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        {"name": name, "partitions": parts} for name, parts in topics.items()])
