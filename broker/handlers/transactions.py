"""The transaction coordinator's APIs: InitProducerId (with a transactional id),
AddPartitionsToTxn (v0-3 from producers, v4 `verify_only` from partition leaders),
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions — request
translation around `ctx.txns` (broker/txn/txn_coordinator.py), where decisions are made.

ListTransactions v2 filters by an RE2 transactional id pattern (KIP-1152), compiled as KIP-848
regex subscriptions are (broker/group/topic_regex.py): INVALID_REGULAR_EXPRESSION for one RE2
refuses.

PRODUCER_FENCED (90) goes only to the versions that declare it (InitProducerId v4+,
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2+); older ones get INVALID_PRODUCER_EPOCH
(47), as in Kafka. TRANSACTION_ABORTABLE (120) is declared by InitProducerId v5,
AddPartitionsToTxn v5, AddOffsetsToTxn v4 and EndTxn v4; as in Kafka's coordinator,
none of these answers it (the partition leaders' and group coordinator's KIP-890 checks do).

Transaction version 2 (KIP-890 part 2): EndTxn v5 bumps the epoch at every commit/abort
and answers the producer id/epoch to go on with; AddPartitionsToTxn v5 without
`verify_only` is a partition leader adding a Produce v12's partition to the transaction.
"""

from __future__ import annotations

import structlog

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.group.group_records import partition_for_group
from raftka.broker.group.topic_regex import InvalidTopicRegex, compile_topic_regex
from raftka.broker.txn.txn_coordinator import wall_ms
from raftka.broker.txn.txn_state import STATE_BY_NAME, TV_1, TV_2, TxnState
from raftka.client.protocol import ErrorCode, InitProducerIdResponse
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.security.acls import AclOperation

log = structlog.get_logger("broker.transactions")

AddPartitionsToTxnResponse = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
AddOffsetsToTxnResponse = response_class(ApiKey.ADD_OFFSETS_TO_TXN)
EndTxnResponse = response_class(ApiKey.END_TXN)
DescribeTransactionsResponse = response_class(ApiKey.DESCRIBE_TRANSACTIONS)
ListTransactionsResponse = response_class(ApiKey.LIST_TRANSACTIONS)

OFFSETS_TOPIC = "__consumer_offsets"
PRODUCER_FENCED = int(ErrorCode.PRODUCER_FENCED)
INVALID_PRODUCER_EPOCH = int(ErrorCode.INVALID_PRODUCER_EPOCH)
TXN_ID_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
FIRST_ID_PATTERN_VERSION = 2  # ListTransactions v2: TransactionalIdPattern (KIP-1152)


def _fenced_for(version: int, first_fenced_version: int, code: int) -> int:
    return INVALID_PRODUCER_EPOCH if code == PRODUCER_FENCED and version < first_fenced_version else code


def _denied_txn_id(ctx, conn, op: AclOperation, transactional_id: str) -> int:
    return acl_checks.transactional_id_error(ctx, conn, op, transactional_id)


async def handle_init_producer_id(ctx: BrokerContext, header, request, conn=None) -> InitProducerIdResponse:
    """InitProducerId with a transactional id (the idempotent path stays in init_producer_id.py)."""
    def answer(code: int, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=_fenced_for(header.api_version, 4, code),
                                      producer_id=pid, producer_epoch=epoch)

    tid = request.transactional_id
    denied = _denied_txn_id(ctx, conn, AclOperation.WRITE, tid)
    if denied:
        return answer(denied)
    pid = request.producer_id if header.api_version >= 3 else -1
    epoch = request.producer_epoch if header.api_version >= 3 else -1
    result = await ctx.txns.init_producer_id(tid, request.transaction_timeout_ms, pid, epoch)
    if result.error:
        log.debug("txn.init_refused", transactional_id=tid, error=result.error)
    return answer(result.error, result.producer_id, result.producer_epoch)


def _topic_partitions(topics) -> dict[tuple[str, int], None]:
    out: dict[tuple[str, int], None] = {}
    for topic in topics:
        for index in topic.partitions:
            out[(topic.name, index)] = None
    return out


def _results(codes: dict[tuple[str, int], int]) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": code})
    return [{"name": t, "results_by_partition": r} for t, r in by_topic.items()]


def _partition_errors(ctx, conn, tps: dict[tuple[str, int], None]) -> dict[tuple[str, int], int]:
    """Kafka's checks before the coordinator: WRITE on each topic (29), existing partitions (3);
    when any fails, the others are OPERATION_NOT_ATTEMPTED (55)."""
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.WRITE, {t for t, _ in tps})
    image = ctx.image
    errors: dict[tuple[str, int], int] = {}
    for topic, index in tps:
        if topic in denied:
            errors[(topic, index)] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        meta = image.topic_by_name(topic)
        if meta is None or index not in meta.partitions:
            errors[(topic, index)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if errors:
        return {tp: errors.get(tp, int(ErrorCode.OPERATION_NOT_ATTEMPTED)) for tp in tps}
    return {}


async def handle_add_partitions_to_txn(ctx: BrokerContext, header, request, conn=None):
    version = header.api_version
    if version >= 4:
        return await _add_partitions_v4(ctx, request, conn, version)
    tid = request.v3_and_below_transactional_id
    tps = _topic_partitions(request.v3_and_below_topics)
    denied = _denied_txn_id(ctx, conn, AclOperation.WRITE, tid)
    codes = dict.fromkeys(tps, denied) if denied else _partition_errors(ctx, conn, tps)
    if not codes:
        code = await ctx.txns.add_partitions(tid, request.v3_and_below_producer_id,
                                             request.v3_and_below_producer_epoch, frozenset(tps))
        codes = dict.fromkeys(tps, _fenced_for(version, 2, code))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_results(codes))


# AddPartitionsToTxn's first version whose adds (verify_only false) come from a transaction
# version 2 partition leader (Kafka's KafkaApis: v5+ is TV_2).
FIRST_TV2_ADD_PARTITIONS_VERSION = 5


async def _add_partitions_v4(ctx, request, conn, version: int):
    """Broker-to-broker (CLUSTER_ACTION): KIP-890's `verify_only` check from partition leaders,
    and at v5 the implicit add of transaction version 2."""
    if acl_checks.cluster_error(ctx, conn, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                          results_by_transaction=[])
    results = []
    for txn in request.transactions:
        tps = _topic_partitions(txn.topics)
        if txn.verify_only:
            top, per = ctx.txns.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                  frozenset(tps))
            codes = {tp: per.get(tp, top) for tp in tps}
        else:
            client_tv = TV_2 if version >= FIRST_TV2_ADD_PARTITIONS_VERSION else TV_1
            code = await ctx.txns.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                 frozenset(tps), client_tv)
            codes = dict.fromkeys(tps, code)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _results(codes)})
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)


def offsets_partition(ctx, group_id: str) -> int:
    """The `__consumer_offsets` partition of `group_id` (its real partition count, else
    `offsets.topic.num.partitions`)."""
    topic = ctx.image.topic_by_name(OFFSETS_TOPIC)
    count = len(topic.partitions) if topic is not None else ctx.config.offsets_topic_num_partitions
    return partition_for_group(group_id, count)


async def handle_add_offsets_to_txn(ctx: BrokerContext, header, request, conn=None):
    def answer(code: int):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_for(header.api_version, 2, code))

    tid = request.transactional_id
    denied = _denied_txn_id(ctx, conn, AclOperation.WRITE, tid)
    if denied:
        return answer(denied)
    denied = acl_checks.group_error(ctx, conn, AclOperation.READ, request.group_id)
    if denied:
        return answer(denied)
    tp = (OFFSETS_TOPIC, offsets_partition(ctx, request.group_id))
    return answer(await ctx.txns.add_partitions(tid, request.producer_id, request.producer_epoch, frozenset({tp})))


FIRST_TV2_END_TXN_VERSION = 5  # Kafka's KafkaApis: EndTxn v5+ is transaction version 2


async def handle_end_txn(ctx: BrokerContext, header, request, conn=None):
    version = header.api_version

    def answer(code: int, pid: int = -1, epoch: int = -1):
        response = EndTxnResponse(throttle_time_ms=0, error_code=_fenced_for(version, 2, code))
        if version >= FIRST_TV2_END_TXN_VERSION:
            response.producer_id, response.producer_epoch = pid, epoch
        return response

    tid = request.transactional_id
    denied = _denied_txn_id(ctx, conn, AclOperation.WRITE, tid)
    if denied:
        return answer(denied)
    client_tv = TV_2 if version >= FIRST_TV2_END_TXN_VERSION else TV_1
    result = await ctx.txns.end_txn(tid, request.producer_id, request.producer_epoch, request.committed, client_tv)
    if result.error:
        return answer(result.error)
    return answer(0, result.producer_id, result.producer_epoch)


def _topics(partitions) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return [{"topic": t, "partitions": p} for t, p in by_topic.items()]


async def handle_describe_transactions(ctx: BrokerContext, header, request, conn=None):
    states = []
    for tid in request.transactional_ids:
        code = _denied_txn_id(ctx, conn, AclOperation.DESCRIBE, tid)
        meta = None
        if not code:
            code, meta = ctx.txns.describe(tid)
        if meta is None:
            states.append({"error_code": code, "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
            continue
        states.append({"error_code": 0, "transactional_id": tid, "transaction_state": meta.state.display_name,
                       "transaction_timeout_ms": meta.timeout_ms, "transaction_start_time_ms": meta.start_ms,
                       "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                       "topics": _topics(meta.partitions)})
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(ctx: BrokerContext, header, request, conn=None):
    known: set[TxnState] = set()
    unknown: list[str] = []
    for name in request.state_filters:
        if name in STATE_BY_NAME:
            known.add(STATE_BY_NAME[name])
        else:
            unknown.append(name)
    pids = set(request.producer_id_filters)
    duration = request.duration_filter if header.api_version >= 1 else -1
    pattern = None
    if header.api_version >= FIRST_ID_PATTERN_VERSION and request.transactional_id_pattern:
        try:  # RE2 as Kafka's (KIP-1152), matching the whole id
            pattern = compile_topic_regex(request.transactional_id_pattern)
        except InvalidTopicRegex:
            return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=[], transaction_states=[])
    code, txns = ctx.txns.list_transactions()
    now = wall_ms()
    listed = []
    visible = acl_checks.visible_transactional_ids(ctx, conn, [m.transactional_id for m in txns])
    for meta in txns:
        if request.state_filters and meta.state not in known:  # as Kafka: only unknown states match none
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and now - meta.start_ms <= duration:  # Kafka: running longer than the filter
            continue
        if meta.transactional_id not in visible:
            continue
        if pattern is not None and not pattern.fullmatch(meta.transactional_id):
            continue
        listed.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                       "transaction_state": meta.state.display_name})
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=unknown,
                                    transaction_states=listed)
