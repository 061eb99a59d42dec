"""The transaction coordinator's pure state machine (broker/txn/txn_state.py), table-driven,
and the `__transaction_state` record format (broker/txn/txn_records.py)."""

from __future__ import annotations

import dataclasses

import pytest

from raftka.broker.txn import txn_state as ts
from raftka.broker.txn.txn_records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    partition_for_txn,
    txn_key,
    txn_value,
)
from raftka.broker.txn.txn_state import TxnMetadata, TxnState
from raftka.broker.txn.txn_verification import (
    TxnOperation,
    produce_error,
    produce_operation,
    txn_offset_commit_operation,
)

S = TxnState
TID = "t1"
MAX = 900_000
TP = frozenset({("a", 0)})
TP2 = frozenset({("a", 0), ("b", 1)})


def meta(state=S.EMPTY, pid=7, epoch=3, parts=frozenset(), start=-1, pending=None, last_pid=-1,
         last_epoch=-1, timeout=60_000, update=0):
    return TxnMetadata(TID, pid, epoch, timeout, state, parts, start, update, last_pid, last_epoch, pending)


# --- InitProducerId ----------------------------------------------------------------------
# (case, metadata, kwargs, expected answer, expected written (pid, epoch, state) or None)
INIT_CASES = [
    ("new id: fresh pid at epoch 0", None, {}, 0, (100, 0, S.EMPTY)),
    ("empty id refused", None, {"tid": ""}, ts.INVALID_REQUEST, None),
    ("timeout 0 refused", None, {"timeout": 0}, ts.INVALID_TRANSACTION_TIMEOUT, None),
    ("timeout above max refused", None, {"timeout": MAX + 1}, ts.INVALID_TRANSACTION_TIMEOUT, None),
    ("only the pid given", meta(), {"pid": 7}, ts.INVALID_REQUEST, None),
    ("Empty bumps", meta(), {}, 0, (7, 4, S.EMPTY)),
    ("CompleteCommit bumps", meta(S.COMPLETE_COMMIT), {}, 0, (7, 4, S.EMPTY)),
    ("CompleteAbort bumps", meta(S.COMPLETE_ABORT), {}, 0, (7, 4, S.EMPTY)),
    ("Ongoing: fenced, aborted at epoch+1, told 51", meta(S.ONGOING, parts=TP, start=5), {},
     ts.CONCURRENT_TRANSACTIONS, (7, 4, S.PREPARE_ABORT)),
    ("PrepareCommit: 51", meta(S.PREPARE_COMMIT, parts=TP), {}, ts.CONCURRENT_TRANSACTIONS, None),
    ("PrepareAbort: 51", meta(S.PREPARE_ABORT, parts=TP), {}, ts.CONCURRENT_TRANSACTIONS, None),
    ("write in flight: 51", meta(pending=S.ONGOING), {}, ts.CONCURRENT_TRANSACTIONS, None),
    ("exhausted epoch: new pid at 0", meta(epoch=32766), {}, 0, (100, 0, S.EMPTY)),
    ("KIP-360 current epoch bumps", meta(), {"pid": 7, "epoch": 3}, 0, (7, 4, S.EMPTY)),
    ("KIP-360 previous epoch: a retry, same answer", meta(epoch=4, last_epoch=3), {"pid": 7, "epoch": 3},
     0, (7, 4, S.EMPTY)),
    ("KIP-360 older epoch: fenced", meta(epoch=5, last_epoch=4), {"pid": 7, "epoch": 3},
     ts.PRODUCER_FENCED, None),
    ("KIP-360 another pid: fenced", meta(), {"pid": 8, "epoch": 3}, ts.PRODUCER_FENCED, None),
    ("KIP-360 previous pid after rotation at an exhausted epoch", meta(pid=9, epoch=0, last_pid=7,
     last_epoch=32766), {"pid": 7, "epoch": 32766}, 0, (9, 0, S.EMPTY)),
    ("KIP-360 on an id just created: the new pid", None, {"pid": 5, "epoch": 2}, 0, (100, 0, S.EMPTY)),
    ("KIP-360 exhausted at the expected epoch: rotation", meta(epoch=32766), {"pid": 7, "epoch": 32766},
     0, (100, 0, S.EMPTY)),
]


@pytest.mark.parametrize("case,before,kw,answer,written", INIT_CASES, ids=[c[0] for c in INIT_CASES])
def test_init_producer_id(case, before, kw, answer, written):
    def run(new_pid):
        return ts.init_producer_id(before, kw.get("tid", TID), kw.get("timeout", 60_000),
                                   expected_pid=kw.get("pid", -1), expected_epoch=kw.get("epoch", -1),
                                   max_timeout_ms=MAX, now_ms=1000, new_producer_id=new_pid)

    try:
        decision = run(None)
    except ts.NeedProducerId:
        decision = run(100)
    assert decision.answer == answer
    if written is None:
        assert decision.write is None
    else:
        w = decision.write
        assert (w.producer_id, w.producer_epoch, w.state) == written
        assert w.pending is None and w.update_ms == 1000
        assert decision.send_markers == (w.state is S.PREPARE_ABORT)


def test_fencing_keeps_the_partitions_for_the_markers_and_a_takeover_costs_two_epochs():
    ongoing = meta(S.ONGOING, parts=TP2, start=5)
    first = ts.init_producer_id(ongoing, TID, 60_000, max_timeout_ms=MAX, now_ms=10)
    assert first.write.partitions == TP2 and first.write.producer_epoch == 4
    done = ts.complete(first.write, 20)
    assert (done.state, done.partitions) == (S.COMPLETE_ABORT, frozenset())
    second = ts.init_producer_id(done, TID, 60_000, max_timeout_ms=MAX, now_ms=30)
    assert (second.answer, second.write.producer_epoch) == (0, 5)


# --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
ADD_CASES = [
    ("unknown id", None, (7, 3), TP, ts.INVALID_PRODUCER_ID_MAPPING, None),
    ("other pid", meta(), (8, 3), TP, ts.INVALID_PRODUCER_ID_MAPPING, None),
    ("old epoch", meta(), (7, 2), TP, ts.PRODUCER_FENCED, None),
    ("write in flight", meta(pending=S.ONGOING), (7, 3), TP, ts.CONCURRENT_TRANSACTIONS, None),
    ("PrepareCommit", meta(S.PREPARE_COMMIT, parts=TP), (7, 3), TP, ts.CONCURRENT_TRANSACTIONS, None),
    ("PrepareAbort", meta(S.PREPARE_ABORT, parts=TP), (7, 3), TP, ts.CONCURRENT_TRANSACTIONS, None),
    ("already added: no write", meta(S.ONGOING, parts=TP2, start=5), (7, 3), TP, 0, None),
    ("Empty starts a txn", meta(), (7, 3), TP, 0, (TP, 1000)),
    ("CompleteCommit starts a txn", meta(S.COMPLETE_COMMIT, start=5), (7, 3), TP, 0, (TP, 1000)),
    ("Ongoing grows, start kept", meta(S.ONGOING, parts=TP, start=5), (7, 3), TP2, 0, (TP2, 5)),
]


@pytest.mark.parametrize("case,before,producer,parts,answer,written", ADD_CASES, ids=[c[0] for c in ADD_CASES])
def test_add_partitions(case, before, producer, parts, answer, written):
    decision = ts.add_partitions(before, TID, *producer, parts, 1000)
    assert decision.answer == answer
    if written is None:
        assert decision.write is None
    else:
        assert decision.write.state is S.ONGOING
        assert (decision.write.partitions, decision.write.start_ms) == written


VERIFY_CASES = [
    ("unknown id", None, (7, 3), ts.INVALID_PRODUCER_ID_MAPPING, {}),
    ("other pid", meta(S.ONGOING, parts=TP), (8, 3), ts.INVALID_PRODUCER_ID_MAPPING, {}),
    ("old epoch", meta(S.ONGOING, parts=TP), (7, 2), ts.PRODUCER_FENCED, {}),
    ("markers pending", meta(S.PREPARE_ABORT, parts=TP), (7, 3), ts.CONCURRENT_TRANSACTIONS, {}),
    ("added and not added", meta(S.ONGOING, parts=TP), (7, 3), 0,
     {("a", 0): 0, ("b", 1): ts.TRANSACTION_ABORTABLE}),
    ("after the end: nothing is added", meta(S.COMPLETE_COMMIT), (7, 3), 0,
     {("a", 0): ts.TRANSACTION_ABORTABLE, ("b", 1): ts.TRANSACTION_ABORTABLE}),
]


@pytest.mark.parametrize("case,before,producer,top,per", VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_only(case, before, producer, top, per):
    assert ts.verify_partitions(before, TID, *producer, TP2) == (top, per)


# --- EndTxn ------------------------------------------------------------------------------
END_CASES = [
    ("unknown id", None, (7, 3), True, ts.INVALID_PRODUCER_ID_MAPPING, None),
    ("other pid", meta(S.ONGOING, parts=TP), (8, 3), True, ts.INVALID_PRODUCER_ID_MAPPING, None),
    ("old epoch", meta(S.ONGOING, parts=TP), (7, 2), True, ts.PRODUCER_FENCED, None),
    ("newer epoch", meta(S.ONGOING, parts=TP), (7, 4), True, ts.PRODUCER_FENCED, None),
    ("write in flight", meta(S.ONGOING, parts=TP, pending=S.ONGOING), (7, 3), True,
     ts.CONCURRENT_TRANSACTIONS, None),
    ("commit", meta(S.ONGOING, parts=TP), (7, 3), True, 0, S.PREPARE_COMMIT),
    ("abort", meta(S.ONGOING, parts=TP), (7, 3), False, 0, S.PREPARE_ABORT),
    ("commit retried while markers go out", meta(S.PREPARE_COMMIT, parts=TP), (7, 3), True,
     ts.CONCURRENT_TRANSACTIONS, None),
    ("commit retried after completion", meta(S.COMPLETE_COMMIT), (7, 3), True, 0, None),
    ("abort retried after completion", meta(S.COMPLETE_ABORT), (7, 3), False, 0, None),
    ("abort after a commit", meta(S.COMPLETE_COMMIT), (7, 3), False, ts.INVALID_TXN_STATE, None),
    # Kafka holds the completion pending while the abort's markers go out: retry, not INVALID_TXN_STATE.
    ("commit while aborting", meta(S.PREPARE_ABORT, parts=TP), (7, 3), True, ts.CONCURRENT_TRANSACTIONS, None),
    ("commit with nothing begun", meta(), (7, 3), True, ts.INVALID_TXN_STATE, None),
]


@pytest.mark.parametrize("case,before,producer,commit,answer,state", END_CASES, ids=[c[0] for c in END_CASES])
def test_end_txn(case, before, producer, commit, answer, state):
    decision = ts.end_txn(before, TID, *producer, commit, 1000)
    assert decision.answer == answer
    if state is None:
        assert decision.write is None
    else:
        assert decision.write.state is state and decision.send_markers
        assert decision.write.partitions == before.partitions  # the markers' destinations
        done = ts.complete(decision.write, 2000)
        assert done.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert done.partitions == frozenset()


# --- timers --------------------------------------------------------------------------------
def test_timeout_aborts_from_the_transaction_start_with_a_bumped_epoch():
    ongoing = meta(S.ONGOING, parts=TP, start=1000, timeout=500)
    assert ts.timed_out(ongoing, 1500) is None  # start + timeout not passed yet
    decision = ts.timed_out(ongoing, 1501)
    assert (decision.write.state, decision.write.producer_epoch) == (S.PREPARE_ABORT, 4)
    assert decision.send_markers
    assert ts.timed_out(meta(S.ONGOING, parts=TP, start=0, pending=S.ONGOING), 10**9) is None
    assert ts.timed_out(meta(S.PREPARE_COMMIT, parts=TP, start=0), 10**9) is None
    # The old producer is fenced by the coordinator from then on.
    assert ts.end_txn(decision.write, TID, 7, 3, True, 1600).answer == ts.PRODUCER_FENCED


@pytest.mark.parametrize("state,expires", [
    (S.EMPTY, True), (S.COMPLETE_COMMIT, True), (S.COMPLETE_ABORT, True), (S.ONGOING, False),
    (S.PREPARE_COMMIT, False), (S.PREPARE_ABORT, False)])
def test_expiration_only_when_idle_and_complete(state, expires):
    m = meta(state, update=1000)
    assert ts.expired(m, 1000 + 604_800_000, 604_800_000) is expires
    assert ts.expired(m, 999 + 604_800_000, 604_800_000) is False
    assert ts.expired(dataclasses.replace(m, pending=S.ONGOING), 10**12, 604_800_000) is False


# --- records -------------------------------------------------------------------------------
@pytest.mark.parametrize("tid,partition", [
    ("hello", 22), ("my-txn", 45), ("polygenelubricants", 0), ("\U0001F600", 49)])
def test_partition_for_matches_java(tid, partition):
    assert partition_for_txn(tid, 50) == partition


def test_record_sizes_match_a_published_dump():
    assert len(txn_key("kafka-txn-0")) == 15
    empty = TxnLogValue(0, 0, 60000, int(S.EMPTY), frozenset(), 1, 1)
    assert len(txn_value(empty, partitions_null=True, version=0)) == 37


@pytest.mark.parametrize("status,parts", [
    (S.EMPTY, frozenset()), (S.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)})),
    (S.COMPLETE_COMMIT, frozenset())])
def test_record_round_trip(status, parts):
    value = TxnLogValue(123, 4, 60000, int(status), parts, 111, 99)
    data = txn_value(value, partitions_null=status is S.EMPTY)
    assert decode_txn_value(data) == value
    assert decode_txn_key(txn_key("x-é")) == "x-é"


# TransactionLogValue v1 as Kafka 4.4's own serializer writes it (kafka-transaction-coordinator
# 4.4.0: MessageUtil.toVersionPrefixedBytes(1, new TransactionLogValue()...), topics in
# raftka's sorted order): a transaction version 2 PrepareCommit at the last epoch with its
# next producer id, and the Empty record after a producer id change.
KAFKA_V1_VALUES = [
    (TxnLogValue(1000, 32767, 60000, int(S.PREPARE_COMMIT), frozenset({("foo", 0), ("foo", 1), ("__consumer_offsets", 7)}),
                 40, 30, previous_producer_id=-1, next_producer_id=1001, client_txn_version=2),
     "000100000000000003e87fff0000ea600203135f5f636f6e73756d65725f6f66667365747302000000070004666f6f0300000000"
     "00000001000000000000000028000000000000001e02010800000000000003e902020002"),
    (TxnLogValue(1001, 0, 60000, int(S.EMPTY), frozenset(), 70, -1, previous_producer_id=1000),
     "000100000000000003e900000000ea6000000000000000000046ffffffffffffffff01000800000000000003e8"),
]


@pytest.mark.parametrize("value,kafka_hex", KAFKA_V1_VALUES)
def test_v1_values_are_kafkas_bytes(value, kafka_hex):
    data = txn_value(value, partitions_null=value.status == S.EMPTY)
    assert data.hex() == kafka_hex
    assert decode_txn_value(data) == value


def test_v1_unknown_tags_are_read_past():
    """Kafka 4.4's tag 3 (NextProducerEpoch) and any future tag are skipped."""
    base = bytes.fromhex(KAFKA_V1_VALUES[1][1])
    tags = bytes([2]) + bytes([3, 2]) + b"\x00\x05" + bytes([9, 1]) + b"\x07"
    data = base[:-len("01000800000000000003e8") // 2] + tags
    assert decode_txn_value(data) == TxnLogValue(1001, 0, 60000, int(S.EMPTY), frozenset(), 70, -1)


@pytest.mark.parametrize("data,message", [
    (b"\x00\x05", "version 5"),
    (b"\x00\x00" + b"\x00" * 5, "needs"),
    (b"\x00\x00" + b"\x00" * 14 + b"\x01" + b"\x00\x00\x00\x01" + b"\x00\x01a" + b"\x7f\xff\xff\xff", "do not fit"),
])
def test_bad_values_are_refused_with_a_reason(data, message):
    with pytest.raises(ValueError, match=message):
        decode_txn_value(data)


def test_from_log_refuses_an_unknown_status():
    with pytest.raises(ValueError, match="status 9"):
        ts.from_log(TID, 1, 0, 1000, 9, frozenset(), 0, 0)


# --- the partition leader's answer for the coordinator's (broker/txn/txn_verification.py) ----
D, G, A = TxnOperation.DEFAULT_ERROR, TxnOperation.GENERIC_ERROR, TxnOperation.ADD_PARTITION


@pytest.mark.parametrize(("coordinator", "operation", "produce"), [
    (0, D, 0), (0, A, 0),
    # Not added: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from Produce v11 / TxnOffsetCommit v4.
    (120, D, 48), (120, G, 120), (120, A, 120),
    # Coordinator moving or loading: NOT_ENOUGH_REPLICAS, which every client retries.
    (14, D, 19), (15, G, 19), (16, A, 19),
    # The previous transaction's markers: 19 to old clients, itself at transaction version 2.
    (51, D, 19), (51, G, 19), (51, A, 51),
    (47, D, 47), (90, D, 47), (90, A, 47),
    (49, D, 48), (49, A, 48),
])
def test_produce_error_per_operation(coordinator, operation, produce):
    assert produce_error(coordinator, operation) == produce


@pytest.mark.parametrize(("version", "produce", "txn_offset_commit"), [
    (3, D, D), (4, D, G), (5, D, A), (10, D, A), (11, G, A), (12, A, A)])
def test_operation_per_request_version(version, produce, txn_offset_commit):
    assert produce_operation(version) is produce
    assert txn_offset_commit_operation(version) is txn_offset_commit
