"""broker/replication/append.py (the write path), broker/replication/purgatory.py and
delayed_produce.py (the acks=all wait), and log/append_origin.py's rules in the log.

The checks' order is a table over `check_partition`; the rest runs on real Partitions
over real PartitionLogs, with pytest-trio's autojump clock for the deadlines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from raftka.broker.replication.append import append_records, check_partition, first_header
from raftka.broker.replication.partition import Partition
from raftka.broker.replication.purgatory import DelayedOperationPurgatory, DelayedResponse
from raftka.broker.replication.replica_manager import UnknownTopicOrPartition
from raftka.broker.txn.txn_verification import TxnOperation
from raftka.client.protocol import ErrorCode
from raftka.log.append_origin import AppendOrigin
from raftka.log.config import LogConfig
from raftka.log.control_record import encode_marker
from raftka.log.errors import InvalidRecord, OutOfOrderSequence
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch
from raftka.raft_meta.metadata.image import PartitionImage

from .conftest import make_batch

CLIENT, COORDINATOR, REPLICATION = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.REPLICATION
PLAIN = make_batch(2)
TXN = encode_batch([Record(None, b"v")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)

# (topic, records, acks, origin, transactional id) -> the partition's refusal (None: go on to the append).
CHECKS = [
    pytest.param("__consumer_offsets", None, 7, CLIENT, None, ErrorCode.INVALID_TOPIC_EXCEPTION,
                 id="internal topic first, before acks and records"),
    pytest.param("__transaction_state", TXN, -1, CLIENT, "tid", ErrorCode.INVALID_TOPIC_EXCEPTION,
                 id="no client writes to the transaction log"),
    pytest.param("__consumer_offsets", PLAIN, -1, COORDINATOR, None, None,
                 id="the coordinator writes its internal topic"),
    pytest.param("t", None, 2, CLIENT, None, ErrorCode.INVALID_REQUIRED_ACKS, id="acks before records"),
    pytest.param("t", TXN, -2, CLIENT, None, ErrorCode.INVALID_REQUIRED_ACKS, id="acks before the transactional rule"),
    pytest.param("t", None, 1, CLIENT, None, ErrorCode.INVALID_RECORD, id="no batch"),
    pytest.param("t", b"", -1, CLIENT, "tid", ErrorCode.INVALID_RECORD, id="empty records"),
    pytest.param("t", TXN, 1, CLIENT, None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                 id="transactional batch without a transactional id"),
    pytest.param("t", TXN, 1, CLIENT, "tid", None, id="transactional batch with its id"),
    pytest.param("t", PLAIN, 0, CLIENT, None, None, id="plain batch, acks=0"),
    pytest.param("t", PLAIN, -1, CLIENT, "tid", None, id="plain batch in a transactional request: the log's rule"),
    pytest.param("t", b"\x00" * 10, 1, CLIENT, None, None, id="a malformed batch is the log's to refuse"),
]


@pytest.mark.parametrize(("topic", "records", "acks", "origin", "transactional_id", "expected"), CHECKS)
def test_checks_in_order(topic, records, acks, origin, transactional_id, expected) -> None:
    refusal = check_partition(topic, records, first_header(records), required_acks=acks, origin=origin,
                              transactional_id=transactional_id)
    assert (refusal and refusal[0]) == (expected and int(expected)), refusal


def _batch_with_sequence(seq: int) -> bytes:
    return encode_batch([Record(None, b"v")], producer_id=9, producer_epoch=0, base_sequence=seq)


# origin -> what the log does with: a sequence gap, a control batch from the leader.
ORIGINS = [
    pytest.param(CLIENT, OutOfOrderSequence, InvalidRecord, id="client: sequences checked, no control batches"),
    pytest.param(COORDINATOR, None, InvalidRecord, id="coordinator: its own sequences, no control batches"),
]


@pytest.mark.parametrize(("origin", "on_gap", "on_control"), ORIGINS)
def test_origin_rules_in_the_log(open_log, origin, on_gap, on_control) -> None:
    log = open_log()
    log.append(_batch_with_sequence(0), 0, origin=origin)
    gap = _batch_with_sequence(5)
    if on_gap is None:
        assert log.append(gap, 0, origin=origin).first_offset == 1
    else:
        with pytest.raises(on_gap):
            log.append(gap, 0, origin=origin)
    marker = encode_marker(producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=True, timestamp_ms=0)
    with pytest.raises(on_control, match="control batch"):
        log.append(marker, 0, origin=origin)


def test_replicated_batches_keep_to_append_as_follower(open_log) -> None:
    log = open_log()
    with pytest.raises(ValueError, match="append_as_follower"):
        log.append(PLAIN, 0, origin=REPLICATION)
    # A follower copies what its leader wrote, a marker included: framing and CRC only.
    marker = encode_marker(producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=True, timestamp_ms=0)
    assert log.append_as_follower(marker).first_offset == 0


@pytest.fixture
def hosted(tmp_path: Path):
    """Factory: hosted(topic, index, replicas, isr, leader) -> a Partition of broker 1 on a real log."""
    logs: list[PartitionLog] = []
    partitions: dict[tuple[str, int], Partition] = {}

    def make(topic: str, index: int, replicas=(1,), isr=(1,), leader: int = 1) -> Partition:
        plog = PartitionLog.open(tmp_path, topic, index, LogConfig(), now_ms=0)
        logs.append(plog)
        p = partitions[(topic, index)] = Partition(topic, "tid-" + topic, index, 1, plog)
        p.apply_image(PartitionImage(replicas, isr, leader, 1, 0), 1, trio.current_time() * 1000)
        return p

    def leader_for(topic: str, index: int) -> Partition:  # ReplicaManager.get_leader's answers
        partition = partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartition(f"{topic}-{index} does not exist")
        partition.check_leader()
        return partition

    make.leader_for = leader_for
    yield make
    for plog in logs:
        plog.close()


async def test_each_partition_fails_alone_and_answers_keep_request_order(hosted, autojump_clock) -> None:
    hosted("t", 0)
    hosted("t", 1, replicas=(1, 2), isr=(1, 2), leader=2)
    hosted("__consumer_offsets", 0)
    hosted("t", 3)
    batch = make_batch(3)
    bad_record = batch[:-1] + bytes([batch[-1] ^ 0xFF])  # CRC no longer matches
    entries = [(("t", 0), PLAIN), (("t", 1), PLAIN), (("__consumer_offsets", 0), PLAIN), (("t", 2), PLAIN),
               (("t", 3), bad_record), (("t", 0), make_batch(1))]
    result = await append_records(hosted.leader_for, entries, required_acks=1, timeout_ms=1000)
    assert result.delayed is None
    codes = {key: r.error_code for key, r in result.responses.items()}
    assert list(codes) == [("t", 0), ("t", 1), ("__consumer_offsets", 0), ("t", 2), ("t", 3)]
    assert codes == {("t", 0): 0, ("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     ("__consumer_offsets", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
                     ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("t", 3): ErrorCode.CORRUPT_MESSAGE}
    assert result.responses[("t", 0)].base_offset == 2  # the second append to t-0 (offsets 0-1 before it)
    with pytest.raises(ValueError, match="append_as_follower"):
        await append_records(hosted.leader_for, entries, required_acks=1, timeout_ms=1000, origin=REPLICATION)


async def test_the_coordinator_appends_to_its_internal_topic(hosted, autojump_clock) -> None:
    hosted("__consumer_offsets", 0)
    result = await append_records(hosted.leader_for, [(("__consumer_offsets", 0), PLAIN)], required_acks=-1,
                                  timeout_ms=1000, origin=COORDINATOR)
    assert result.responses[("__consumer_offsets", 0)].error_code == 0
    await DelayedOperationPurgatory("Produce").complete(result.delayed)  # the leader alone: replicated at once
    assert result.responses[("__consumer_offsets", 0)].error_code == 0


async def test_acks_all_completes_at_the_deadline_with_what_was_replicated(hosted, autojump_clock) -> None:
    """DelayedProduce: a partition replicated in time answers 0, one still waiting at the request's
    deadline answers REQUEST_TIMED_OUT, and the answer comes exactly at the deadline."""
    replicated, stuck = hosted("t", 0, replicas=(1, 2), isr=(1, 2)), hosted("t", 1, replicas=(1, 2), isr=(1, 2))
    started = trio.current_time()
    result = await append_records(hosted.leader_for, [(("t", 0), PLAIN), (("t", 1), PLAIN)], required_acks=-1,
                                  timeout_ms=1500)
    assert result.delayed is not None and result.delayed.deadline == started + 1.5
    purgatory = DelayedOperationPurgatory("Produce")
    answer = DelayedResponse(purgatory, result.delayed, lambda: dict(result.responses))
    finished: list[dict] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _collect(answer, finished))
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.size == 1 and not finished
        replicated.update_follower_fetch(2, 2, trio.current_time() * 1000)
        await trio.testing.wait_all_tasks_blocked()
        assert not finished  # t-1 still waits
    assert trio.current_time() == started + 1.5 and purgatory.size == 0
    (responses,) = finished
    assert responses[("t", 0)].error_code == 0
    assert responses[("t", 1)].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert "offset 2 not replicated to the ISR" in responses[("t", 1)].error_message
    assert stuck.high_watermark == 0


async def test_acks_all_answers_as_soon_as_every_partition_is_settled(hosted, autojump_clock) -> None:
    """One partition replicated, the other's leadership moved: NOT_LEADER_OR_FOLLOWER at once,
    not at the deadline (the client retries on the new leader)."""
    replicated, moved = hosted("t", 0, replicas=(1, 2), isr=(1, 2)), hosted("t", 1, replicas=(1, 2), isr=(1, 2))
    started = trio.current_time()
    result = await append_records(hosted.leader_for, [(("t", 0), PLAIN), (("t", 1), PLAIN)], required_acks=-1,
                                  timeout_ms=30_000)
    purgatory = DelayedOperationPurgatory("Produce")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(purgatory.complete, result.delayed)
        await trio.testing.wait_all_tasks_blocked()
        moved.apply_image(PartitionImage((1, 2), (1, 2), 2, 2, 1), 1, trio.current_time() * 1000)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.size == 1  # t-0 still waits
        replicated.update_follower_fetch(2, 2, trio.current_time() * 1000)
    assert trio.current_time() == started and result.delayed.is_completed
    assert result.responses[("t", 0)].error_code == 0
    assert result.responses[("t", 1)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def _collect(answer: DelayedResponse, into: list) -> None:
    into.append(await answer.finish())


class Coordinator:
    """The transaction coordinator's verify_only answers (the real one is in
    tests/integration/test_txn_verification.py); `meanwhile` runs while the question is in flight."""

    def __init__(self, answer: int, meanwhile=lambda: None, first: tuple[int, ...] = ()) -> None:
        self.answer, self.meanwhile, self.asked, self.first = answer, meanwhile, [], list(first)

    async def verify(self, transactional_id, producer_id, producer_epoch, topic, partition, operation=None) -> int:
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        await trio.sleep(0)
        self.meanwhile()
        return self.first.pop(0) if self.first else self.answer


async def test_kip890_verification_before_the_append(hosted, autojump_clock) -> None:
    p = hosted("t", 0)
    refused = Coordinator(ErrorCode.INVALID_TXN_STATE)
    result = await append_records(hosted.leader_for, [(("t", 0), TXN)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=refused)
    assert result.responses[("t", 0)].error_code == ErrorCode.INVALID_TXN_STATE
    assert refused.asked == [("tid", 7, 0, "t", 0)] and p.log_end_offset == 0  # nothing appended
    added = Coordinator(0)
    for seq in (0, 1):  # the second batch: the producer's transaction is open here, no question
        batch = encode_batch([Record(None, b"v")], producer_id=7, producer_epoch=0, base_sequence=seq,
                             transactional=True)
        result = await append_records(hosted.leader_for, [(("t", 0), batch)], required_acks=1, timeout_ms=1000,
                                      transactional_id="tid", verifier=added)
        assert result.responses[("t", 0)].error_code == 0
    assert len(added.asked) == 1 and p.log_end_offset == 2


async def test_kip890_a_marker_landing_meanwhile_voids_the_answer(hosted, autojump_clock) -> None:
    p = hosted("t", 0)
    marker_lands = Coordinator(0, lambda: p.append_marker_as_leader(7, 0, 0, False))
    result = await append_records(hosted.leader_for, [(("t", 0), TXN)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=marker_lands)
    assert result.responses[("t", 0)].error_code == ErrorCode.INVALID_TXN_STATE
    assert p.log_end_offset == 1  # the marker only


async def test_transaction_version_2_retries_an_add_behind_the_previous_markers(hosted, autojump_clock) -> None:
    """Produce v12: the coordinator answers CONCURRENT_TRANSACTIONS while the previous
    transaction's markers are written; the leader asks again, each question with its own
    guard, so that marker (landing during the first) does not void the later yes."""
    p = hosted("t", 0)
    landed = []

    def marker_once() -> None:
        if not landed:
            landed.append(p.append_marker_as_leader(7, 0, 0, True))

    busy_then_added = Coordinator(0, marker_once, first=(ErrorCode.CONCURRENT_TRANSACTIONS,))
    batch = encode_batch([Record(None, b"v")], producer_id=7, producer_epoch=1, base_sequence=0, transactional=True)
    result = await append_records(hosted.leader_for, [(("t", 0), batch)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=busy_then_added,
                                  txn_operation=TxnOperation.ADD_PARTITION)
    assert result.responses[("t", 0)].error_code == 0
    assert len(busy_then_added.asked) == 2 and p.log_end_offset == 2  # the marker, then the batch
    # Still busy after the retries (100 ms): told as itself, nothing appended.
    always_busy = Coordinator(ErrorCode.CONCURRENT_TRANSACTIONS)
    batch = encode_batch([Record(None, b"w")], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    result = await append_records(hosted.leader_for, [(("t", 0), batch)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid2", verifier=always_busy,
                                  txn_operation=TxnOperation.ADD_PARTITION)
    assert result.responses[("t", 0)].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert len(always_busy.asked) > 1 and p.log_end_offset == 2


async def test_transaction_version_2_the_previous_marker_at_the_new_epoch_leaves_the_add_standing(
        hosted, autojump_clock) -> None:
    """Transaction version 2 writes the previous transaction's markers at the epoch the next one
    runs at: such a marker landing while the next transaction's add is in flight does not void
    it (Kafka's isV2NextTransactionStarted); one at another epoch still does."""
    p = hosted("t", 0)
    opened = await append_records(hosted.leader_for, [(("t", 0), TXN)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=Coordinator(0))
    assert opened.responses[("t", 0)].error_code == 0
    marker_lands = Coordinator(0, lambda: p.append_marker_as_leader(7, 1, 0, True, transaction_version=2))
    batch = encode_batch([Record(None, b"v")], producer_id=7, producer_epoch=1, base_sequence=0, transactional=True)
    result = await append_records(hosted.leader_for, [(("t", 0), batch)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=marker_lands,
                                  txn_operation=TxnOperation.ADD_PARTITION)
    assert result.responses[("t", 0)].error_code == 0
    assert p.log_end_offset == 3  # the first batch, the marker, the next transaction's batch
    other_epoch = Coordinator(0, lambda: p.append_marker_as_leader(7, 2, 0, False, transaction_version=2))
    batch = encode_batch([Record(None, b"w")], producer_id=7, producer_epoch=3, base_sequence=0, transactional=True)
    result = await append_records(hosted.leader_for, [(("t", 0), batch)], required_acks=1, timeout_ms=1000,
                                  transactional_id="tid", verifier=other_epoch,
                                  txn_operation=TxnOperation.ADD_PARTITION)
    assert result.responses[("t", 0)].error_code == ErrorCode.INVALID_TXN_STATE


async def test_verifications_of_one_producer_in_flight_share_the_guard(hosted, autojump_clock) -> None:
    """A second produce of the producer asking meanwhile does not void the first one's answer
    (Kafka's maybeCreateVerificationStateEntry reuses the entry); a marker voids both."""
    p = hosted("t", 0)
    first = p.verification_guard(7, 0)
    second = p.verification_guard(7, 0)
    assert p.guard_holds(7, first) and p.guard_holds(7, second)
    assert p.verification_guard(8, 0) is not first
