"""The leader's fetch-session cache (KIP-227 epochs, eviction), sans-IO."""

from __future__ import annotations

import pytest

from raftka.broker.replication.fetch_session_state import (
    MAX_EPOCH,
    FetchSessionCache,
    SessionError,
    SessionPartition,
    next_epoch,
)
from raftka.client.protocol import ErrorCode


def test_epochs_advance_by_one_and_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1


def test_create_then_continue_with_each_next_epoch() -> None:
    cache = FetchSessionCache()
    session = cache.create(replica_id=2, now=0.0)
    assert session.session_id != 0 and session.epoch == 1
    for epoch in (1, 2, 3):
        assert cache.lookup(session.session_id, epoch, 2, now=1.0) is session
    assert session.epoch == 4


def test_wrong_epoch_unknown_id_and_other_replica_are_refused() -> None:
    cache = FetchSessionCache()
    session = cache.create(replica_id=2, now=0.0)
    with pytest.raises(SessionError) as wrong:
        cache.lookup(session.session_id, 5, 2, now=0.0)
    assert wrong.value.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert "epoch 5, expected 1" in str(wrong.value)
    with pytest.raises(SessionError) as unknown:
        cache.lookup(session.session_id + 100, 1, 2, now=0.0)
    assert unknown.value.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    with pytest.raises(SessionError) as other:  # another replica cannot use this session
        cache.lookup(session.session_id, 1, 3, now=0.0)
    assert other.value.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    cache.remove(session.session_id)
    with pytest.raises(SessionError):
        cache.lookup(session.session_id, 1, 2, now=0.0)


def test_full_cache_evicts_the_least_recently_used() -> None:
    cache = FetchSessionCache(max_sessions=2)
    first = cache.create(1, now=0.0)
    second = cache.create(2, now=0.0)
    cache.lookup(first.session_id, 1, 1, now=1.0)  # first is now the most recently used
    third = cache.create(3, now=2.0)
    assert len(cache) == 2
    cache.lookup(first.session_id, 2, 1, now=3.0)
    cache.lookup(third.session_id, 1, 3, now=3.0)
    with pytest.raises(SessionError):
        cache.lookup(second.session_id, 1, 2, now=3.0)


def test_idle_sessions_expire_when_a_new_one_is_made() -> None:
    cache = FetchSessionCache(idle_timeout_s=10.0)
    old = cache.create(1, now=0.0)
    cache.create(2, now=11.0)
    assert len(cache) == 1
    with pytest.raises(SessionError):
        cache.lookup(old.session_id, 1, 1, now=11.0)


def test_a_partition_is_news_until_its_high_watermark_and_log_start_were_sent() -> None:
    sp = SessionPartition("t", 0, fetch_offset=5, log_start_offset=0, partition_max_bytes=1 << 20,
                          current_leader_epoch=3)
    assert sp.changed_since_sent(10, 0)  # never sent
    sp.sent_high_watermark, sp.sent_log_start_offset = 10, 0
    assert not sp.changed_since_sent(10, 0)
    assert sp.changed_since_sent(11, 0) and sp.changed_since_sent(10, 4)
