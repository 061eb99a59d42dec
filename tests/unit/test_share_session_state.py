"""broker/group/share_session_state.py: share sessions as Kafka 4.4's ShareSessionCache and
ShareFetchContext, as tables of request sequences and what each gets."""

from __future__ import annotations

import uuid

import pytest

from raftka.broker.group.share_session_state import (
    ContextKind,
    ShareSessionCache,
    ShareSessionError,
    ShareSessionKey,
    next_epoch,
)

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
A = ShareSessionKey("g", "m1")
B = ShareSessionKey("g", "m2")


def _run(cache: ShareSessionCache, step: tuple) -> str:
    """One request: ("fetch", key, epoch, to_fetch, forgotten, acknowledging[, conn]) or
    ("ack", key, epoch) or ("closed", conn). Returns what it got, as text."""
    try:
        if step[0] == "fetch":
            _, key, epoch, to_fetch, forgotten, acking, *conn = step
            ctx = cache.new_context(key, epoch, to_fetch, forgotten, acking, conn[0] if conn else "c1")
            parts = ",".join(f"{'T' if t == T else 'U'}{p}" for t, p in ctx.partitions)
            next_ = ctx.session.epoch if ctx.session is not None else "-"
            closed = f" closed={ctx.closed.key.member_id}" if ctx.closed is not None else ""
            return f"{ctx.kind.value} [{parts}] next={next_}{closed}"
        if step[0] == "ack":
            session, closing = cache.acknowledge_context(step[1], step[2])
            return f"ack closing={closing} next={session.epoch}"
        gone = cache.connection_closed(step[1])
        return "gone " + ",".join(s.key.member_id for s in gone)
    except ShareSessionError as exc:
        return f"error {exc.error_code}"


# (name, max sessions, steps, what each step gets)
TABLE = [
    ("open then continue", 10,
     [("fetch", A, 0, [(T, 0), (T, 1)], [], False), ("fetch", A, 1, [], [], True), ("fetch", A, 2, [], [], False)],
     ["full [T0,T1] next=1", "incremental [T0,T1] next=2", "incremental [T0,T1] next=3"]),
    ("incremental adds and forgets", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", A, 1, [(U, 3)], [(T, 0)], False)],
     ["full [T0] next=1", "incremental [U3] next=2"]),
    ("wrong epoch: INVALID_SHARE_SESSION_EPOCH (123), the session keeps its epoch", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", A, 5, [], [], False), ("fetch", A, 1, [], [], False)],
     ["full [T0] next=1", "error 123", "incremental [T0] next=2"]),
    ("unknown session: SHARE_SESSION_NOT_FOUND (122)", 10,
     [("fetch", A, 1, [(T, 0)], [], False), ("fetch", A, -1, [], [], False), ("ack", A, 1), ("ack", A, -1)],
     ["error 122", "error 122", "error 122", "error 122"]),
    ("epoch 0 with acknowledgements: INVALID_REQUEST (42)", 10,
     [("fetch", A, 0, [(T, 0)], [], True)], ["error 42"]),
    ("epoch -1 naming partitions (their acknowledgements): closes, fetches nothing (Kafka 4.4)", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", A, -1, [(T, 0)], [], True), ("fetch", A, 1, [], [], False)],
     ["full [T0] next=1", "final [] next=- closed=m1", "error 122"]),
    ("epoch -1 closes: the next epoch 1 finds nothing", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", A, -1, [], [], True), ("fetch", A, 1, [], [], False)],
     ["full [T0] next=1", "final [] next=- closed=m1", "error 122"]),
    ("epoch 0 again replaces the session", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", A, 1, [], [], False), ("fetch", A, 0, [(U, 1)], [], False),
      ("fetch", A, 2, [], [], False)],
     ["full [T0] next=1", "incremental [T0] next=2", "full [U1] next=1", "error 123"]),
    ("ShareAcknowledge: epoch 0 refused, n continues, -1 closes", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("ack", A, 0), ("ack", A, 1), ("fetch", A, 2, [], [], False),
      ("ack", A, 2), ("ack", A, -1), ("ack", A, 1)],
     ["full [T0] next=1", "error 123", "ack closing=False next=2", "incremental [T0] next=3",
      "error 123", "ack closing=True next=3", "error 122"]),
    ("the bound: SHARE_SESSION_LIMIT_REACHED (133), nothing evicted; replacing one's own is fine", 1,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", B, 0, [(T, 0)], [], False), ("fetch", A, 0, [], [], False),
      ("fetch", A, 1, [], [], False)],
     ["full [T0] next=1", "error 133", "full [] next=1", "incremental [] next=2"]),
    ("sessions are per member", 10,
     [("fetch", A, 0, [(T, 0)], [], False), ("fetch", B, 0, [(T, 1)], [], False), ("fetch", B, 1, [], [], False),
      ("fetch", A, 1, [], [], False)],
     ["full [T0] next=1", "full [T1] next=1", "incremental [T1] next=2", "incremental [T0] next=2"]),
    ("a closed connection takes its sessions", 10,
     [("fetch", A, 0, [(T, 0)], [], False, "c1"), ("fetch", B, 0, [(T, 0)], [], False, "c2"), ("closed", "c1"),
      ("fetch", A, 1, [], [], False), ("fetch", B, 1, [], [], False)],
     ["full [T0] next=1", "full [T0] next=1", "gone m1", "error 122", "incremental [T0] next=2"]),
]


@pytest.mark.parametrize(("name", "max_sessions", "steps", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_share_sessions(name: str, max_sessions: int, steps: list, expected: list[str]) -> None:
    cache = ShareSessionCache(max_sessions)
    assert [_run(cache, step) for step in steps] == expected


@pytest.mark.parametrize(("epoch", "after"), [(1, 2), (2**31 - 1, 1), (0, 1)])
def test_next_epoch_wraps_to_one(epoch: int, after: int) -> None:
    assert next_epoch(epoch) == after


def test_answers_name_only_partitions_with_news() -> None:
    # Kafka 4.4 answers a share fetch that acquired nothing with no partitions, full or not.
    cache = ShareSessionCache()
    full = cache.new_context(A, 0, [(T, 0), (T, 1)], [], False, "c")
    assert full.kind is ContextKind.FULL
    got = {tp: full.include(tp, has_records=tp == (T, 1), error=0, acknowledged=False) for tp in full.partitions}
    assert got == {(T, 0): False, (T, 1): True}
    assert full.include((T, 0), False, 3, False) and full.include((T, 0), False, 0, True)
    full.sent((T, 0), error=3)  # an error answered: an incremental answer names it once more
    inc = cache.new_context(A, 1, [(U, 0)], [], False, "c")
    assert [inc.include(tp, False, 0, False) for tp in inc.partitions] == [True, False, False]
    inc.sent((T, 0))
    again = cache.new_context(A, 2, [], [], False, "c")
    assert [again.include(tp, False, 0, False) for tp in again.partitions] == [False, False, False]


def test_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="group.share.max.share.sessions"):
        ShareSessionCache(0)
