"""The SDK's group consumer on a real broker, sharing a group with a librdkafka member."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import trio

from raftka.client import AsyncConsumer, TopicPartition
from raftka.client.assignors import range_assign, roundrobin_assign
from raftka.client.group_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tests.integration.cluster_support import create_topic, running_cluster
from tests.integration.groups_support import GROUP_EXTRA, ThreadMember, produce
from tests.integration.sdk_broker import RAFTKA, raftka_env

TOPIC = "mixed"
PARTITIONS = 4


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory) -> Iterator[str]:
    with running_cluster(tmp_path_factory.mktemp("groups-sdk"), nodes=1, extra=GROUP_EXTRA) as cluster:
        create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=1)
        yield cluster.bootstrap_servers


async def wait_for(predicate, timeout: float, what: str) -> None:
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class SdkMember:
    def __init__(self, consumer: AsyncConsumer) -> None:
        self.consumer = consumer
        self.values: list[int] = []
        self.assigned: set[TopicPartition] = set()
        self.revoked_calls = 0

    def on_assigned(self, tps) -> None:
        self.assigned = set(tps)

    async def on_revoked(self, tps) -> None:
        self.revoked_calls += 1
        self.assigned = set()

    async def run(self) -> None:
        while True:
            batches = await self.consumer.poll(timeout_ms=200)
            for records in batches.values():
                self.values += [int(r.value) for r in records]
            if batches:
                await self.consumer.commit()


async def test_sdk_and_librdkafka_members_share_a_group(bootstrap):
    group = "mixed-group"
    await trio.to_thread.run_sync(produce, bootstrap, TOPIC, 0, 200, PARTITIONS)
    rdkafka = ThreadMember(bootstrap, group, TOPIC)
    try:
        async with AsyncConsumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=4000,
                                 heartbeat_interval_ms=500, partition_assignment_strategy=["range"]) as c:
            sdk = SdkMember(c)
            c.subscribe([TOPIC], on_partitions_assigned=sdk.on_assigned,
                        on_partitions_revoked=sdk.on_revoked)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sdk.run)

                def split() -> bool:
                    mine = {tp.partition for tp in sdk.assigned}
                    return (len(mine) == 2 and len(rdkafka.assignment) == 2
                            and mine | rdkafka.assignment == set(range(PARTITIONS)))

                await wait_for(split, 40, "the SDK and librdkafka members to split 4 partitions 2/2")
                await wait_for(lambda: set(sdk.values) | set(rdkafka.values) >= set(range(200)), 30,
                               "200 messages consumed by the pair")
                mine = sorted(sdk.assigned)
                nursery.cancel_scope.cancel()
            for tp in mine:
                assert await c.committed(tp) == 50, f"committed offset of {tp}"
                assert await c.position(tp) == 50
            c.pause(mine[0])
            assert c.paused() == {mine[0]}
            c.resume(mine[0])
        # close() left the group: the librdkafka member takes everything.
        await wait_for(lambda: rdkafka.assignment == set(range(PARTITIONS)), 30,
                       "librdkafka to own all partitions after the SDK member left")
    finally:
        await trio.to_thread.run_sync(rdkafka.stop)

    # The CLI sees the group, its committed offsets and lag, and can delete it once empty.
    out = await _cli("groups", "describe", "--bootstrap-server", bootstrap, "--group", group)
    assert "mixed-group" in out and TOPIC in out, out
    listed = await _cli("groups", "list", "--bootstrap-server", bootstrap)
    assert group in listed.split()
    await _cli("groups", "delete", "--bootstrap-server", bootstrap, "--group", group)
    listed = await _cli("groups", "list", "--bootstrap-server", bootstrap)
    assert group not in listed.split()


async def test_restarted_sdk_member_resumes_from_committed_offsets(bootstrap):
    group = "resume-group"
    topic_tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    kwargs = dict(group_id=group, auto_offset_reset="earliest", session_timeout_ms=4000,
                  heartbeat_interval_ms=500, auto_commit_interval_ms=200)
    seen: list[int] = []
    async with AsyncConsumer(bootstrap, **kwargs) as c:
        c.subscribe(pattern="mix.*")
        with trio.move_on_after(30):
            while len(set(seen)) < 100:
                for records in (await c.poll(200)).values():
                    seen += [int(r.value) for r in records]
        assert c.subscription() == {TOPIC}
    # close() auto-committed the position of everything poll() returned.
    async with AsyncConsumer(bootstrap, group_id=group) as admin_view:
        committed = {tp: await admin_view.committed(tp) for tp in topic_tps}
    ends = {}
    async with AsyncConsumer(bootstrap) as probe:
        ends = await probe.end_offsets(topic_tps)
    consumed_before = len(seen)
    assert sum(v for v in committed.values() if v is not None) == consumed_before
    await trio.to_thread.run_sync(produce, bootstrap, TOPIC, 10_000, 40, PARTITIONS)
    resumed: list[int] = []
    async with AsyncConsumer(bootstrap, **kwargs) as c:
        c.subscribe([TOPIC])
        with trio.move_on_after(30):
            while not set(range(10_000, 10_040)) <= set(resumed):
                for records in (await c.poll(200)).values():
                    resumed += [int(r.value) for r in records]
    assert set(range(10_000, 10_040)) <= set(resumed)
    assert len(resumed) == 40 + sum(ends.values()) - consumed_before  # nothing re-read, nothing skipped


async def test_an_assign_consumer_with_a_group_id_starts_at_the_committed_offsets(bootstrap):
    """assign() with a group_id: a partition starts at the group's committed offset, the reset
    policy only for one with nothing committed, and seek() overrides both (Kafka's consumer)."""
    group = "assign-committed"
    tps = [TopicPartition(TOPIC, p) for p in range(2)]
    await trio.to_thread.run_sync(produce, bootstrap, TOPIC, 20_000, 4 * PARTITIONS, PARTITIONS)
    async with AsyncConsumer(bootstrap) as probe:
        ends = await probe.end_offsets(tps)
    assert all(ends[tp] >= 4 for tp in tps), ends
    async with AsyncConsumer(bootstrap, group_id=group) as committer:
        committer.assign(tps[:1])
        await committer.commit({tps[0]: 3})
    async with AsyncConsumer(bootstrap, group_id=group, auto_offset_reset="latest") as c:
        c.assign(tps)
        assert (await c.position(tps[0]), await c.position(tps[1])) == (3, ends[tps[1]])
        first = [r for records in (await c.poll(10_000)).values() for r in records]
        assert first and min(r.offset for r in first if r.partition == 0) == 3
        c.assign([*tps, TopicPartition(TOPIC, 2)])
        c.seek(TopicPartition(TOPIC, 2), 1)
        assert await c.position(TopicPartition(TOPIC, 2)) == 1


def test_consumer_protocol_round_trips_and_assignors_match_kafka():
    sub = Subscription(("a", "b"), b"ud")
    assert decode_subscription(encode_subscription(sub)) == sub
    asg = Assignment((TopicPartition("a", 0), TopicPartition("a", 2)), None)
    assert decode_assignment(encode_assignment(asg)) == asg
    subs = {"m1": Subscription(("t",)), "m2": Subscription(("t",)), "m3": Subscription(("t", "u"))}
    ranged = range_assign(subs, {"t": 7, "u": 2})
    assert [tp.partition for tp in ranged["m1"]] == [0, 1, 2]
    assert [tp.partition for tp in ranged["m2"]] == [3, 4]
    assert ranged["m3"] == [TopicPartition("t", 5), TopicPartition("t", 6), TopicPartition("u", 0),
                            TopicPartition("u", 1)]
    rr = roundrobin_assign(subs, {"t": 4, "u": 2})
    assert rr["m1"] == [TopicPartition("t", 0), TopicPartition("t", 3)]
    assert rr["m3"] == [TopicPartition("t", 2), TopicPartition("u", 0), TopicPartition("u", 1)]


async def _cli(*args: str) -> str:
    result = await trio.to_thread.run_sync(lambda: subprocess.run(
        [*RAFTKA, *args], env=raftka_env(), capture_output=True, text=True, timeout=60))
    assert result.returncode == 0, f"raftka {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def test_blocking_consumer_subscribes_commits_and_resumes(bootstrap):
    from raftka.client.admin import NewTopic
    from raftka.client.blocking import Admin, Consumer

    topic = "blocking-group"
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    produce(bootstrap, topic, 0, 40, 2)
    assigned: list[set] = []
    options = {"group_id": "blocking", "auto_offset_reset": "earliest", "enable_auto_commit": False}
    with Consumer(bootstrap, **options) as consumer:
        consumer.subscribe([topic], on_partitions_assigned=assigned.append)
        assert consumer.subscription() == {topic}
        seen: list[int] = []
        for _ in range(200):
            for records in consumer.poll(timeout_ms=200).values():
                seen.extend(int(r.value) for r in records)
            if len(seen) >= 20:
                break
        assert assigned and assigned[0] == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        consumer.commit()
        committed = {tp: consumer.committed(tp) for tp in assigned[0]}
        assert sum(committed.values()) == len(seen)
    produce(bootstrap, topic, 40, 10, 2)
    with Consumer(bootstrap, **options) as consumer:
        consumer.subscribe([topic])
        rest: list[int] = []
        for _ in range(200):
            for records in consumer.poll(timeout_ms=200).values():
                rest.extend(int(r.value) for r in records)
            if len(seen) + len(rest) >= 50:
                break
    assert sorted(seen + rest) == list(range(50)), "a restarted member skipped or re-read committed data"


async def test_generation_is_public_and_moves_with_rebalances(bootstrap):
    options = {"group_id": "generations", "auto_offset_reset": "earliest", "session_timeout_ms": 6000}

    async def keep_polling(consumer: AsyncConsumer, stop: trio.Event) -> None:
        while not stop.is_set():  # each member polls in its own task, as an application would
            await consumer.poll(timeout_ms=100)

    async with AsyncConsumer(bootstrap, **options) as first, AsyncConsumer(bootstrap, **options) as second:
        assert first.generation is None  # not a member yet
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            first.subscribe([TOPIC])
            nursery.start_soon(keep_polling, first, stop)
            await wait_for(lambda: first.generation is not None, 30, "the first member to join")
            joined = first.generation
            second.subscribe([TOPIC])
            nursery.start_soon(keep_polling, second, stop)
            await wait_for(lambda: second.generation is not None and first.generation != joined
                           and second.generation == first.generation, 30, "a rebalance including both")
            stop.set()
        assert first.generation > joined
