"""The group timers fire at exactly the deadline they were set to (trio's MockClock: no
wall clock), and a group's static member is expired by its timer at its session deadline."""

from __future__ import annotations

import trio
import trio.testing

from raftka.broker.group.group_state import GroupPhase
from raftka.broker.group.group_timers import MIN_REFIRE_MS, DeadlineTimers, now_ms
from tests.unit.test_group_static import SESSION, join, make_group


def _run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


def test_each_timer_fires_at_its_deadline_and_resets_and_cancels() -> None:
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        timers = DeadlineTimers()
        start = now_ms()
        timers.set("a", start + 6_000)
        timers.set("b", start + 2_000)
        timers.set("c", start + 1_000)
        timers.set("c", None)  # cancelled
        timers.set("b", start + 3_000)  # moved later (a heartbeat)

        def on_due(key: str, at: float) -> float | None:
            fired.append((key, at - start))
            return None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(timers.run, on_due)
            await trio.sleep(5)
            timers.set("d", now_ms() + 500)  # set while the loop sleeps until a's deadline
            await trio.sleep(10)
            nursery.cancel_scope.cancel()
        assert len(timers) == 0

    _run(main)
    assert fired == [("b", 3_000), ("d", 5_500), ("a", 6_000)]


def test_a_deadline_that_does_not_move_on_is_refired_later_not_spun() -> None:
    fired: list[float] = []

    async def main() -> None:
        timers = DeadlineTimers()
        start = now_ms()
        timers.set("g", start + 10)

        def on_due(key: str, at: float) -> float:
            fired.append(at - start)
            return at  # a state machine that failed to move on

        async with trio.open_nursery() as nursery:
            nursery.start_soon(timers.run, on_due)
            await trio.sleep(0.0135)
            nursery.cancel_scope.cancel()

    _run(main)
    assert fired == [10, 10 + MIN_REFIRE_MS, 10 + 2 * MIN_REFIRE_MS, 10 + 3 * MIN_REFIRE_MS]


def test_static_member_expiry_is_scheduled_at_its_session_deadline() -> None:
    """The coordinator's wiring in miniature: after each request, the group's timer is set to
    `next_deadline_ms()`; the timer then ticks the group at exactly that instant."""
    expired_at: list[float] = []

    async def main() -> None:
        group = make_group()
        timers = DeadlineTimers()
        start = now_ms()
        member, _ = join(group, instance="i1", now=start)
        assert group.phase is GroupPhase.COMPLETING_REBALANCE
        group.sync(member, group.generation_id, {member: b"A"}, start)
        timers.set("g", group.next_deadline_ms())
        assert timers.deadline("g") == start + SESSION  # the process stopped: no heartbeat

        def on_due(key: str, at: float) -> float | None:
            _, removed = group.tick(at)
            if removed:
                expired_at.append(at - start)
            return group.next_deadline_ms()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(timers.run, on_due)
            await trio.sleep(3 * SESSION / 1000)
            nursery.cancel_scope.cancel()
        assert group.phase is GroupPhase.EMPTY and timers.deadline("g") is None

    _run(main)
    assert expired_at == [SESSION]
