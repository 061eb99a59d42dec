"""The producer hot path after the performance work: same behaviour, less work."""

import trio
import trio.testing

from raftka.client.accumulator import RecordAccumulator
from raftka.client.producer import DeliveryFuture, OutgoingRecord
from raftka.client.records import RecordMetadata, TopicPartition
from raftka.log.record_batch import Record, decode_batch, encode_batch

TP = TopicPartition("t", 0)


def test_expiry_takes_old_batches_from_the_head_only():
    acc = RecordAccumulator(batch_size=100, linger_ms=0)
    for ms in range(10):  # one closed batch per record: 10 batches, created at 0..9
        acc.append(TP, Record(None, b"x" * 90), f"f{ms}", float(ms))
    first = acc.drain(TP)
    acc.reenqueue(first, retry_at_ms=50)  # a retried batch goes back to the front
    expired = acc.expire_older_than(3.0)
    assert [b.futures for b in expired] == [["f0"], ["f1"], ["f2"]]
    assert [b.created_ms for b in acc.pending_batches()] == [float(ms) for ms in range(3, 10)]
    assert acc.expire_older_than(3.0) == []


def test_an_outgoing_record_encodes_like_a_record():
    records = [Record(b"k", b"v" * 300, (("h", b"1"), ("n", None)), 1000 + i) for i in range(200)]
    outgoing = [OutgoingRecord(r.key, r.value, r.headers, r.timestamp) for r in records]
    encoded = encode_batch(outgoing, producer_id=7, producer_epoch=1, base_sequence=5)
    assert encoded == encode_batch(records, producer_id=7, producer_epoch=1, base_sequence=5)
    decoded = decode_batch(encoded)  # CRC verified
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded.records] == [
        (r.key, r.value, r.headers, r.timestamp) for r in records]


def test_large_deltas_and_null_fields_round_trip():
    records = [Record(None, None, (), 0), Record(b"", b"", (), 10**12),
               Record(b"k" * 20000, b"v" * 70000, (), 5, 100_000)]
    decoded = decode_batch(encode_batch(records, base_offset=3))
    assert [(r.key, r.value, r.timestamp, r.offset) for r in decoded.records] == [
        (None, None, 0, 3), (b"", b"", 10**12, 4), (b"k" * 20000, b"v" * 70000, 5, 100_000)]


async def test_delivery_future_without_waiters_or_callbacks():
    meta = RecordMetadata("t", 0, 5, 1)
    fut = DeliveryFuture("t", 1)
    assert not fut.done()
    fut._finish(meta, None)
    fut._finish(None, RuntimeError("a second outcome is ignored"))
    assert fut.done() and fut.result() == meta and await fut == meta
    seen = []
    fut.add_callback(lambda m, e: seen.append((m, e)))
    assert seen == [(meta, None)]


async def test_delivery_future_wakes_waiters_and_calls_callbacks():
    fut = DeliveryFuture("t", 1)
    seen = []
    fut.add_callback(lambda m, e: seen.append(e))
    fut.add_callback(lambda m, e: seen.append("second"))
    error = RuntimeError("lost")
    caught = []

    async def waiter():
        try:
            await fut
        except RuntimeError as exc:
            caught.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        fut._finish(None, error)
    assert caught == [error] and seen == [error, "second"]
    assert fut.exception() is error
