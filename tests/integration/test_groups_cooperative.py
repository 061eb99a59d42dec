"""Cooperative (KIP-429) and static (KIP-345) SDK group members on a real broker, alone and
mixed with librdkafka members using the same cooperative-sticky assignor."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import trio

from raftka.client import AsyncConsumer, AsyncProducer, KafkaError, TopicPartition
from raftka.client.protocol import ErrorCode
from tests.integration.cluster_support import create_topic, running_cluster
from tests.integration.groups_support import GROUP_EXTRA, ThreadMember, produce

PARTITIONS = 4
COOP = {"partition_assignment_strategy": ["cooperative-sticky"], "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "auto_commit_interval_ms": 200}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory) -> Iterator[str]:
    with running_cluster(tmp_path_factory.mktemp("groups-coop"), nodes=1, extra=GROUP_EXTRA) as cluster:
        for topic in ("coop", "coop-mixed", "static-sdk"):
            create_topic(cluster, topic, partitions=PARTITIONS, rf=1)
        yield cluster.bootstrap_servers


async def wait_for(predicate, timeout: float, what: str) -> None:
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Member:
    """An SDK group member polling in a task: records what it consumed, its callbacks, and which
    partitions brought records while its rebalance was in progress."""

    def __init__(self, consumer: AsyncConsumer, slow_first_assign_s: float = 0.0) -> None:
        self.consumer = consumer
        self.values: dict[int, list[int]] = {}  # partition -> values in consumption order
        self.assigned_calls: list[set[int]] = []
        self.revoked_calls: list[set[int]] = []
        self.during_rebalance: set[int] = set()
        self._slow_first_assign_s = slow_first_assign_s

    async def on_assigned(self, tps) -> None:
        self.assigned_calls.append({tp.partition for tp in tps})
        if len(self.assigned_calls) == 1 and self._slow_first_assign_s:
            # Holds up this member's next rejoin, so the group's second cooperative round stays
            # open for a while: the other member must keep consuming meanwhile.
            await trio.sleep(self._slow_first_assign_s)

    def on_revoked(self, tps) -> None:
        self.revoked_calls.append({tp.partition for tp in tps})

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def consumed(self) -> set[int]:
        return {v for values in self.values.values() for v in values}

    async def run(self) -> None:
        while True:
            batches = await self.consumer.poll(timeout_ms=100)
            rebalancing = self.consumer.rebalance_in_progress
            for tp, records in batches.items():
                self.values.setdefault(tp.partition, []).extend(int(r.value) for r in records)
                if rebalancing:
                    self.during_rebalance.add(tp.partition)


async def produce_until(stop: trio.Event, bootstrap: str, topic: str, counter: Iterator[int],
                        sent: list[int]) -> None:
    # Stopped by an event, not by cancellation: the producer closes (and flushes) normally.
    async with AsyncProducer(bootstrap, acks="all", linger_ms=2) as producer:
        while not stop.is_set():
            i = next(counter)
            await producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
            sent.append(i)
            await trio.sleep(0.005)


async def test_cooperative_members_revoke_only_what_moves_and_keep_consuming(bootstrap):
    topic, group = "coop", "coop-group"
    sent: list[int] = []
    stop_producing = trio.Event()
    async with trio.open_nursery() as producers:
        producers.start_soon(produce_until, stop_producing, bootstrap, topic, itertools.count(), sent)
        async with AsyncConsumer(bootstrap, group_id=group, **COOP) as ca, \
                AsyncConsumer(bootstrap, group_id=group, **COOP) as cb:
            a, b = Member(ca), Member(cb, slow_first_assign_s=2.0)
            async with trio.open_nursery() as nursery:
                ca.subscribe([topic], on_partitions_assigned=a.on_assigned, on_partitions_revoked=a.on_revoked)
                nursery.start_soon(a.run)
                await wait_for(lambda: a.owned == set(range(PARTITIONS)) and len(a.values) == PARTITIONS, 30,
                               "the first member to own and consume all partitions")
                cb.subscribe([topic], on_partitions_assigned=b.on_assigned, on_partitions_revoked=b.on_revoked)
                nursery.start_soon(b.run)
                await wait_for(lambda: len(b.owned) == 2 and len(a.owned) == 2 and not ca.rebalance_in_progress
                               and not cb.rebalance_in_progress, 40, "a 2/2 split")
                moved = set(range(PARTITIONS)) - a.owned
                kept = a.owned
                # Only the two moving partitions were revoked from a — once; a lost nothing else.
                assert a.revoked_calls == [moved], a.revoked_calls
                # on_partitions_assigned gets only what is new (often nothing, as in Kafka).
                assert [c for c in a.assigned_calls if c] == [set(range(PARTITIONS))], a.assigned_calls
                # b got nothing in the first round (the partitions were still a's), then them.
                assert b.assigned_calls == [set(), moved], b.assigned_calls
                assert b.revoked_calls == []
                # a kept consuming what it kept while the second round was open.
                assert a.during_rebalance & kept, "no records from retained partitions during the rebalance"
                await wait_for(lambda: moved <= set(b.values), 20, "b to consume its partitions")
                stop_at = len(sent)
                await wait_for(lambda: set(sent[:stop_at]) <= a.consumed() | b.consumed(), 30,
                               "everything sent to be consumed by the pair")
                nursery.cancel_scope.cancel()
        stop_producing.set()
    for p in kept:  # retained partitions were never re-read: their positions were kept
        assert len(a.values[p]) == len(set(a.values[p])), f"partition {p} re-read by its owner"
    for p in moved:  # b resumed where a committed on revoke: at most a small overlap
        overlap = set(a.values.get(p, ())) & set(b.values.get(p, ()))
        assert len(overlap) < 50, f"partition {p}: b re-read {len(overlap)} records a had consumed"


async def test_cooperative_sdk_and_librdkafka_members_share_a_group(bootstrap):
    """Both directions: the SDK leads a librdkafka follower, then librdkafka leads an SDK follower."""
    topic, group = "coop-mixed", "coop-mixed-group"
    await trio.to_thread.run_sync(produce, bootstrap, topic, 0, 200, PARTITIONS)
    rdkafka: ThreadMember | None = None
    try:
        async with AsyncConsumer(bootstrap, group_id=group, **COOP) as c1:
            sdk = Member(c1)
            async with trio.open_nursery() as nursery:
                c1.subscribe([topic], on_partitions_assigned=sdk.on_assigned, on_partitions_revoked=sdk.on_revoked)
                nursery.start_soon(sdk.run)
                await wait_for(lambda: sdk.owned == set(range(PARTITIONS)), 30, "the SDK member to own everything")
                rdkafka = await trio.to_thread.run_sync(
                    lambda: ThreadMember(bootstrap, group, topic, **{"partition.assignment.strategy": "cooperative-sticky"}))
                await wait_for(lambda: len(sdk.owned) == 2 and rdkafka.assignment == set(range(PARTITIONS)) - sdk.owned
                               and not c1.rebalance_in_progress, 40, "the SDK leader to hand librdkafka 2 partitions")
                assert sdk.revoked_calls == [rdkafka.assignment], "the SDK revoked more than what moved"
                await wait_for(lambda: sdk.consumed() | set(rdkafka.values) >= set(range(200)), 30,
                               "200 messages consumed by the pair")
                nursery.cancel_scope.cancel()
        # The SDK member left: librdkafka, now alone (and the leader), takes everything.
        await wait_for(lambda: rdkafka.assignment == set(range(PARTITIONS)), 30, "librdkafka to own everything")
        revokes_before = len(rdkafka.revoked_calls)
        async with AsyncConsumer(bootstrap, group_id=group, **COOP) as c2:
            follower = Member(c2)
            async with trio.open_nursery() as nursery:
                c2.subscribe([topic], on_partitions_assigned=follower.on_assigned,
                             on_partitions_revoked=follower.on_revoked)
                nursery.start_soon(follower.run)
                await wait_for(lambda: len(follower.owned) == 2 and rdkafka.assignment == set(range(PARTITIONS))
                               - follower.owned and not c2.rebalance_in_progress, 40,
                               "librdkafka's plan to give the SDK follower 2 partitions")
                # librdkafka revoked only what moved to the SDK member, never everything.
                assert rdkafka.revoked_calls[revokes_before:] == [follower.owned], rdkafka.revoked_calls
                assert follower.revoked_calls == []
                nursery.cancel_scope.cancel()
    finally:
        if rdkafka is not None:
            await trio.to_thread.run_sync(rdkafka.stop)
    assert not rdkafka.errors or all("REBALANCE" in e or "ILLEGAL" in e or "UNKNOWN_MEMBER" in e
                                     for e in rdkafka.errors), rdkafka.errors


async def test_restarted_static_sdk_member_gets_its_partitions_back_without_a_rebalance(bootstrap):
    topic, group = "static-sdk", "static-sdk-group"
    options = dict(group_id=group, auto_offset_reset="earliest", session_timeout_ms=8000,
                   heartbeat_interval_ms=300, partition_assignment_strategy=["range"])
    async with AsyncConsumer(bootstrap, **options) as other_consumer:
        other = Member(other_consumer)
        async with trio.open_nursery() as nursery:
            other_consumer.subscribe([topic], on_partitions_assigned=other.on_assigned,
                                     on_partitions_revoked=other.on_revoked)
            nursery.start_soon(other.run)
            await wait_for(lambda: other.owned == set(range(PARTITIONS)), 30, "the dynamic member to own all")
            async with AsyncConsumer(bootstrap, group_instance_id="static-1", **options) as first, \
                    trio.open_nursery() as static_tasks:
                static = Member(first)
                first.subscribe([topic], on_partitions_assigned=static.on_assigned)
                static_tasks.start_soon(static.run)
                await wait_for(lambda: len(static.owned) == 2 and len(other.owned) == 2
                               and not other_consumer.rebalance_in_progress, 40, "a 2/2 split")
                before = static.owned
                generation = other_consumer._group.generation_id
                calls = (len(other.assigned_calls), len(other.revoked_calls))
                static_member_id = first._group.member_id
                static_tasks.cancel_scope.cancel()
            # close() sent no LeaveGroup: the group still counts the static member, nobody moved.
            async with AsyncConsumer(bootstrap, group_instance_id="static-1", **options) as second, \
                    trio.open_nursery() as static_tasks:
                restarted = Member(second)
                second.subscribe([topic], on_partitions_assigned=restarted.on_assigned)
                static_tasks.start_soon(restarted.run)
                await wait_for(lambda: restarted.owned, 30, "the restarted static member's assignment")
                assert restarted.owned == before
                assert second._group.member_id != static_member_id
                assert second._group.generation_id == generation, "the restart started a new generation"
                # The other member saw no rebalance at all.
                assert (len(other.assigned_calls), len(other.revoked_calls)) == calls
                assert other_consumer._group.generation_id == generation
                static_tasks.cancel_scope.cancel()
            nursery.cancel_scope.cancel()


async def test_a_second_process_with_the_same_instance_id_fences_the_first(bootstrap):
    options = dict(group_id="fence-group", auto_offset_reset="earliest", session_timeout_ms=8000,
                   heartbeat_interval_ms=200, group_instance_id="duplicate")

    async def poll_until_assigned(consumer: AsyncConsumer) -> None:
        with trio.move_on_after(30):
            while not consumer.assignment():
                await consumer.poll(100)
        assert consumer.assignment(), "no assignment within 30s"

    async with AsyncConsumer(bootstrap, **options) as first:
        first.subscribe(["static-sdk"])
        await poll_until_assigned(first)
        async with AsyncConsumer(bootstrap, **options) as second:
            second.subscribe(["static-sdk"])
            await poll_until_assigned(second)  # it took the instance over
            error = None
            with trio.move_on_after(20):
                try:
                    while True:
                        await first.poll(100)
                except KafkaError as exc:
                    error = exc
            assert error is not None and error.code == ErrorCode.FENCED_INSTANCE_ID, error
            assert second.assignment() == {TopicPartition("static-sdk", p) for p in range(PARTITIONS)}
