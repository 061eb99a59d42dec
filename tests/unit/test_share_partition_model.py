"""Queue semantics of broker/group/share_partition_state.py under random schedules (seeded, pure).

Three members share one partition of N records: they fetch at random, acknowledge at random
(mostly ACCEPT, some RELEASE and REJECT), let locks time out, and leave, and the leader restarts
from its persisted state; one record is poisoned (its consumer always RELEASEs it). After every step the state's invariants hold; at
the end, once a well-behaved member has drained the partition, the issue's promises hold:
every record was delivered, nothing acknowledged was delivered again, an unacknowledged record
came back after its lock timed out, and the poisoned record stopped at the delivery limit.
"""

from __future__ import annotations

import random

import pytest

from raftka.broker.group.share_partition_state import (
    INVALID_RECORD_STATE,
    NONE,
    AcknowledgementBatch,
    AcknowledgeType,
    RecordState,
    ShareConfig,
    SharePartitionState,
)

N = 120
POISON = 37
CONFIG = ShareConfig(record_lock_duration_ms=30_000, max_record_locks=25, delivery_count_limit=4)
MEMBERS = ("m1", "m2", "m3")


class Run:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.state = SharePartitionState(0, CONFIG)
        self.now = 0
        self.held: dict[str, set[int]] = {m: set() for m in MEMBERS}
        self.deliveries: dict[int, int] = {}  # offset -> attempts counted (a restart forgets one in flight)
        self.restarts = 0
        self.accepted: set[int] = set()
        self.rejected: set[int] = set()
        self.timed_out: set[int] = set()  # offsets made AVAILABLE again by a lock timeout
        self.last_spso = 0

    # -- actions ---------------------------------------------------------------------------

    def fetch(self, member: str) -> None:
        first = self.state.next_fetch_offset()
        if first >= N:
            return
        last = min(N - 1, first + self.rng.randrange(1, 15))
        for a in self.state.acquire(member, first, last, self.now, self.rng.randrange(1, 12)):
            for offset in range(a.first_offset, a.last_offset + 1):
                assert offset not in self.accepted, f"offset {offset} delivered again after ACCEPT"
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert a.delivery_count == self.deliveries[offset] <= CONFIG.delivery_count_limit
                # The others are not told: a member whose lock ran out still thinks it holds it.
                self.held[member].add(offset)

    def ack(self, member: str, types: dict[int, int] | None = None) -> None:
        held = sorted(self.held[member])
        if not held:
            return
        if types is None:
            chosen = sorted(self.rng.sample(held, self.rng.randrange(1, len(held) + 1)))
            types = {o: self._choose_type(o) for o in chosen}
        batches: list[AcknowledgementBatch] = []
        for offset in sorted(types):
            last = batches[-1] if batches else None
            if last is not None and last.last_offset + 1 == offset:
                batches[-1] = AcknowledgementBatch(last.first_offset, offset, (*last.acknowledge_types, types[offset]))
            else:
                batches.append(AcknowledgementBatch(offset, offset, (types[offset],)))
        valid = all(o < self.state.start_offset or (
            (r := self.state.records.get(o)) is not None and r.state is RecordState.ACQUIRED and r.member_id == member)
            for o in types)
        skipped = {o for o in types if o < self.state.start_offset}  # already done: the core skips them
        before = {o: (r.state, r.delivery_count, r.member_id, r.lock_deadline_ms) for o, r in self.state.records.items()}
        outcome = self.state.acknowledge(member, batches, self.now)
        if not valid:
            assert outcome.error == INVALID_RECORD_STATE, outcome
            after = {o: (r.state, r.delivery_count, r.member_id, r.lock_deadline_ms)
                     for o, r in self.state.records.items()}
            assert after == before, "a refused acknowledgement changed the state"
            self.held[member] -= set(types)  # its view was stale
            return
        assert outcome.error == NONE, outcome
        self.held[member] -= skipped
        for offset, ack in types.items():
            if offset in skipped:
                continue
            if ack == AcknowledgeType.ACCEPT:
                assert offset not in self.accepted
                self.accepted.add(offset)
            elif ack == AcknowledgeType.REJECT:
                self.rejected.add(offset)
            self.held[member].discard(offset)

    def _choose_type(self, offset: int) -> int:
        if offset == POISON:
            return AcknowledgeType.RELEASE
        return self.rng.choices([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT],
                                [8, 2, 1])[0]

    def tick(self) -> None:
        self.now += self.rng.choice([10, 1_000, 20_000, 31_000])
        acquired_before = {o for o, r in self.state.records.items() if r.state is RecordState.ACQUIRED}
        self.state.expire_locks(self.now)
        for o in acquired_before:
            r = self.state.records.get(o)
            if r is not None and r.state is RecordState.AVAILABLE:
                self.timed_out.add(o)

    def restart(self) -> None:
        """The leader stops and another loads the persisted state; members are not told."""
        for offset, r in self.state.records.items():
            if r.state is RecordState.ACQUIRED:
                self.deliveries[offset] -= 1  # persisted before that attempt
        s = self.state
        self.state = SharePartitionState.load(s.start_offset, list(s.persisted_batches()), CONFIG)
        self.restarts += 1

    def leave(self, member: str) -> None:
        self.state.release_member(member)
        self.held[member].clear()

    # -- checks ----------------------------------------------------------------------------

    def check(self) -> None:
        s = self.state
        assert s.start_offset >= self.last_spso, "the SPSO moved back"
        self.last_spso = s.start_offset
        assert s.in_flight_count <= CONFIG.max_record_locks
        assert s.start_offset <= s.next_fetch_offset() <= N
        for offset, r in s.records.items():
            assert s.start_offset <= offset <= s.end_offset, (offset, s.start_offset, s.end_offset)
            assert r.delivery_count <= CONFIG.delivery_count_limit
            assert (r.state is RecordState.ACQUIRED) == bool(r.member_id) == (r.lock_deadline_ms is not None)
            if r.state is RecordState.ACKNOWLEDGED:
                assert offset in self.accepted
        head = s.records.get(s.start_offset)
        assert head is None or not head.state.terminal, "a terminal record at the SPSO"

    def run(self, steps: int) -> None:
        for _ in range(steps):
            action = self.rng.choices(["fetch", "ack", "tick", "leave", "restart"], [5, 5, 2, 0.3, 0.2])[0]
            member = self.rng.choice(MEMBERS)
            if action == "fetch":
                self.fetch(member)
            elif action == "ack":
                self.ack(member)
            elif action == "tick":
                self.tick()
            elif action == "leave":
                self.leave(member)
            else:
                self.restart()
            self.check()

    def drain(self) -> None:
        """A well-behaved member takes everything left and accepts all but the poisoned record."""
        for _ in range(10_000):
            if self.state.start_offset >= N:
                return
            self.tick()
            self.fetch("m1")
            self.ack("m1", {o: AcknowledgeType.RELEASE if o == POISON else AcknowledgeType.ACCEPT
                            for o in self.held["m1"]})
            self.check()
        raise AssertionError(f"not drained: SPSO {self.state.start_offset}, records {self.state.records}")


@pytest.mark.parametrize("seed", range(40))
def test_random_schedules_keep_the_queue_promises(seed: int) -> None:
    run = Run(seed)
    run.run(400)
    run.drain()
    assert run.state.start_offset == N and not run.state.records
    assert set(run.deliveries) == set(range(N)), "a record was never delivered"
    assert run.deliveries[POISON] == CONFIG.delivery_count_limit and POISON not in run.accepted
    # Every record not accepted was given up on: rejected, or out of attempts.
    for offset in set(range(N)) - run.accepted:
        assert offset in run.rejected or run.deliveries[offset] == CONFIG.delivery_count_limit, offset


def test_timeouts_and_restarts_do_happen_in_the_schedules() -> None:
    """The schedules exercise lock timeouts and restarts (else those promises would be vacuous)."""
    timed_out, restarts = set(), 0
    for seed in range(40):
        run = Run(seed)
        run.run(400)
        timed_out |= run.timed_out
        restarts += run.restarts
    assert len(timed_out) > 10 and restarts > 10


def _observed(state: SharePartitionState) -> tuple:
    records = {o: (r.state, r.delivery_count, r.member_id, r.lock_deadline_ms) for o, r in state.records.items()}
    return state.start_offset, state.end_offset, state.next_fetch_offset(), state.persisted_batches(), records


@pytest.mark.parametrize("seed", range(10))
def test_a_copy_is_the_state_and_independent_of_it(seed: int) -> None:
    """`copy()` (the shell's undo when a persist fails) equals the state at every step of a
    random schedule, and the schedule's next steps do not change it."""
    run = Run(seed)
    for _ in range(60):
        taken = run.state.copy()
        seen = _observed(run.state)
        assert _observed(taken) == seen and taken.config is run.state.config
        run.run(5)
        assert _observed(taken) == seen
