"""The pure parts of the Kafka listener limits: connection quotas and the request-memory
budget (broker/net/connection_quotas.py, broker/net/request_memory.py), and the frame decoder's
view of the request in progress."""

from __future__ import annotations

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.broker.net.connection_quotas import ConnectionLimits, ConnectionQuotas, normalise_ip
from raftka.broker.net.request_memory import RequestMemoryPool
from raftka.client.protocol import FrameDecoder


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", "127.0.0.1"),
    ("::ffff:127.0.0.1", "127.0.0.1"),   # a dual-stack listener's IPv4 peer
    ("::1", "::1"),
    ("0:0:0:0:0:0:0:1", "::1"),
    ("fe80::1%eth0", "fe80::1"),
    ("not-an-ip", "not-an-ip"),
])
def test_normalise_ip(host: str, expected: str) -> None:
    assert normalise_ip(host) == expected


def test_per_ip_limit_and_overrides() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=2,
                                               per_ip_overrides={"10.0.0.9": 0, "10.0.0.5": 3}))
    assert [quotas.admit("10.0.0.1") for _ in range(2)] == [None, None]
    refusal = quotas.admit("10.0.0.1")
    assert refusal is not None and (refusal.reason, refusal.ip, refusal.limit) == \
        ("max.connections.per.ip", "10.0.0.1", 2)
    assert str(refusal) == "10.0.0.1 already has 2 connection(s), the max.connections.per.ip limit"
    assert quotas.count("10.0.0.1") == 2 and quotas.total == 2  # a refusal counts nothing
    assert [quotas.admit("10.0.0.5") is None for _ in range(4)] == [True, True, True, False]
    assert quotas.admit("10.0.0.9") is not None
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.1") is None
    for ip in ["10.0.0.1", "10.0.0.1", "10.0.0.5", "10.0.0.5", "10.0.0.5"]:
        quotas.release(ip)
    assert quotas.total == 0 and quotas.count("10.0.0.1") == 0 and not quotas._per_ip  # no leftovers


@pytest.mark.parametrize(("listener", "total", "available"), [
    ("CLIENT", 2, True), ("CLIENT", 3, False), ("REPLICATION", 3, True), ("REPLICATION", 50, True),
])
def test_max_connections_spares_the_protected_listener(listener: str, total: int, available: bool) -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections=3, protected_listener="REPLICATION"))
    for i in range(total):
        assert quotas.admit(f"10.0.0.{i}") is None
    assert quotas.slot_available(listener) is available


async def test_wait_for_slot_returns_when_a_connection_closes() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections=1))
    quotas.admit("10.0.0.1")
    got_slot = trio.Event()

    async def acceptor() -> None:
        await quotas.wait_for_slot("CLIENT")
        got_slot.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(acceptor)
        await trio.testing.wait_all_tasks_blocked()
        assert not got_slot.is_set()
        quotas.release("10.0.0.1")
        await got_slot.wait()


def test_decoder_missing_counts_down_to_the_next_frame() -> None:
    decoder = FrameDecoder()
    assert (decoder.frame_size, decoder.missing) == (None, 4)
    assert decoder.feed(b"\x00\x00") == [] and decoder.missing == 2
    assert decoder.feed(b"\x00\x05ab") == [] and (decoder.frame_size, decoder.missing) == (5, 3)
    assert decoder.feed(b"cde\x00") == [b"abcde"] and (decoder.frame_size, decoder.missing) == (None, 3)


@pytest.mark.parametrize(("capacity", "used", "size", "oldest", "allowed"), [
    (None, 10**12, 10**6, False, True),    # no budget: accounting only
    (100, 0, 500, False, True),            # an empty pool grants anything (no request is too big)
    (100, 60, 40, False, True),
    (100, 60, 41, False, False),           # over the budget: wait...
    (100, 60, 41, True, True),             # ...unless this is the oldest request in progress
    (100, 500, 1, True, True),
])
def test_may_reserve(capacity: int | None, used: int, size: int, oldest: bool, allowed: bool) -> None:
    pool = RequestMemoryPool(capacity)
    pool.used = used
    me, other = object(), object()
    if not oldest:
        pool.request_started(other)
    pool.request_started(me)
    assert pool.may_reserve(me, size) is allowed


def test_request_order_is_by_start() -> None:
    pool = RequestMemoryPool(10)
    pool.used = 10
    a, b = object(), object()
    pool.request_started(a)
    pool.request_started(b)
    pool.request_started(a)  # idempotent: a is still the oldest
    assert pool.may_reserve(a, 1) and not pool.may_reserve(b, 1)
    pool.request_finished(a)
    pool.request_finished(a)  # idempotent
    assert pool.may_reserve(b, 1)


async def test_reserve_waits_for_release_or_for_becoming_the_oldest() -> None:
    pool = RequestMemoryPool(100)
    holder, waiter, later = object(), object(), object()
    pool.request_started(holder)
    await pool.reserve(holder, 90)
    order: list[str] = []

    async def reserve(owner: object, size: int, name: str) -> None:
        await pool.reserve(owner, size)
        order.append(name)

    async with trio.open_nursery() as nursery:
        pool.request_started(waiter)
        nursery.start_soon(reserve, waiter, 50, "waiter")
        nursery.start_soon(reserve, later, 5, "small")  # fits: no queueing behind the waiter
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["small"] and pool.waiting == 1 and pool.used == 95
        pool.request_finished(holder)  # the waiter is now the oldest request: it may go on
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["small", "waiter"] and pool.used == 145 and pool.waiting == 0
    pool.release(145)
    assert pool.used == 0


def test_pool_rejects_a_useless_capacity() -> None:
    with pytest.raises(ValueError, match="capacity must be > 0 or None, got 0"):
        RequestMemoryPool(0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=12), st.data())
def test_decoder_frames_are_independent_of_how_bytes_arrive(payloads: list[bytes], data) -> None:
    stream = b"".join(len(p).to_bytes(4, "big") + p for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = FrameDecoder(max_frame_size=4000)
    frames: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        piece = stream[start:end]
        frames += decoder.feed(data.draw(st.sampled_from([bytes, bytearray, memoryview]))(piece))
        prefix_parsed = 4 if decoder.frame_size is not None else 0
        assert decoder.buffered == end - sum(len(f) + 4 for f in frames) - prefix_parsed
    assert frames == payloads and all(type(f) is bytes for f in frames)
    decoder.eof()
