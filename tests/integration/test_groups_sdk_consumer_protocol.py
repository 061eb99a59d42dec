"""The SDK's consumer with `group_protocol="consumer"` (KIP-848) on a real broker: members
share partitions and hand them over as the coordinator assigns, a member the broker
expired (session timeout) loses its partitions and rejoins, and an SDK member shares a
group with a librdkafka `group.protocol=consumer` member."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from raftka.client import AsyncConsumer, TopicPartition
from raftka.client.protocol import ApiKey
from raftka.testing.local_cluster import LocalCluster
from tests.compat.wire_client import WireConnection
from tests.integration.cluster_support import create_topic, running_cluster
from tests.integration.groups_support import GROUP_EXTRA, ThreadMember, produce
from tests.integration.test_groups_sdk import wait_for
from tests.support import wait_until

PARTITIONS = 4
SESSION_TIMEOUT_MS = 3000
EXTRA = {**GROUP_EXTRA, "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
         "group.consumer.heartbeat.interval.ms": "250"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("groups-kip848-sdk"), nodes=1, extra=EXTRA) as cluster:
        yield cluster


def topic_of(cluster: LocalCluster, name: str, records: int) -> set[TopicPartition]:
    """A fresh topic with `records` values 0.. over its partitions; its partitions."""
    create_topic(cluster, name, partitions=PARTITIONS, rf=1)
    produce(cluster.bootstrap_servers, name, 0, records, PARTITIONS)
    return {TopicPartition(name, p) for p in range(PARTITIONS)}


def options(group: str, **extra) -> dict:
    return {"group_id": group, "group_protocol": "consumer", "auto_offset_reset": "earliest",
            "enable_auto_commit": False, **extra}


class Member:
    """An SDK member tracking its partitions through the (incremental) callbacks."""

    def __init__(self, consumer: AsyncConsumer, topic: str) -> None:
        self.consumer, self.topic = consumer, topic
        self.values: list[int] = []
        self.owned: set[TopicPartition] = set()
        self.revoked: list[set[TopicPartition]] = []

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic], on_partitions_assigned=self.owned.update,
                                on_partitions_revoked=self._revoked)

    def _revoked(self, tps) -> None:
        self.revoked.append(set(tps))
        self.owned -= set(tps)

    async def run(self) -> None:
        while True:
            batches = await self.consumer.poll(timeout_ms=100)
            for records in batches.values():
                self.values += [int(r.value) for r in records]
            if batches:
                await self.consumer.commit()


def described(bootstrap: str, group: str):
    """The group as ConsumerGroupDescribe shows it (one broker: the coordinator)."""
    with WireConnection(bootstrap) as conn:
        return conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]


def group_members(bootstrap: str, group: str) -> list:
    return list(described(bootstrap, group).members)


async def test_two_members_share_then_the_survivor_takes_everything(cluster):
    group, topic, bootstrap = "kip848-pair", "kip848-pair", cluster.bootstrap_servers
    every = await trio.to_thread.run_sync(topic_of, cluster, topic, 200)
    async with AsyncConsumer(bootstrap, **options(group)) as a:
        first = Member(a, topic)
        first.subscribe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.run)
            await wait_for(lambda: first.owned == every, 30, "the first member to own every partition")
            joined_epoch = a.generation
            assert joined_epoch is not None and joined_epoch > 0
            assert a._group is not None and a._group.heartbeat_interval_ms == 250  # the broker's, not ours
            async with AsyncConsumer(bootstrap, **options(group)) as b, trio.open_nursery() as inner:
                second = Member(b, topic)
                second.subscribe()
                inner.start_soon(second.run)
                await wait_for(lambda: len(first.owned) == 2 and len(second.owned) == 2
                               and first.owned | second.owned == every, 30, "a 2/2 split")
                # Revoke first: the partitions that moved were given up by the first member.
                assert set().union(*first.revoked) == second.owned
                await wait_for(lambda: len(first.values) + len(second.values) >= 200, 30, "200 records")
                assert a.generation > joined_epoch
                described = {m.member_id: m.member_epoch for m in group_members(bootstrap, group)}
                assert set(described) == {a.group_metadata().member_id, b.group_metadata().member_id}
                inner.cancel_scope.cancel()  # then b's close() leaves with epoch -1
            await wait_for(lambda: first.owned == every, 30, "the survivor to own every partition again")
            await trio.to_thread.run_sync(produce, bootstrap, topic, 1000, 40, PARTITIONS)
            await wait_for(lambda: len(first.values) + len(second.values) >= 240, 30, "the 40 new records")
            nursery.cancel_scope.cancel()
        # Each record exactly once: commits after each batch and revocation before assignment.
        assert sorted(first.values + second.values) == [*range(200), *range(1000, 1040)]
        ends = {tp: 60 for tp in every}
        assert {tp: await a.committed(tp) for tp in every} == ends
    assert group_members(bootstrap, group) == []  # close() left the group


class AutoCommitMember(Member):
    """Commits nothing itself: only auto-commit stores its offsets."""

    async def run(self) -> None:
        while True:
            for records in (await self.consumer.poll(timeout_ms=100)).values():
                self.values += [int(r.value) for r in records]


async def test_auto_commit_commits_what_moves_away_before_revoking_it(cluster):
    group, topic, bootstrap = "kip848-autocommit", "kip848-autocommit", cluster.bootstrap_servers
    every = await trio.to_thread.run_sync(topic_of, cluster, topic, 200)
    # Periodic auto-commit is far away: what the next owner starts from is the revoke's commit.
    auto = options(group, enable_auto_commit=True, auto_commit_interval_ms=600_000)
    async with AsyncConsumer(bootstrap, **auto) as a, trio.open_nursery() as nursery:
        first = AutoCommitMember(a, topic)
        first.subscribe()
        nursery.start_soon(first.run)
        await wait_for(lambda: len(first.values) == 200, 30, "the first member to read everything")
        async with AsyncConsumer(bootstrap, **auto) as b, trio.open_nursery() as inner:
            second = AutoCommitMember(b, topic)
            second.subscribe()
            inner.start_soon(second.run)
            await wait_for(lambda: len(second.owned) == 2 and first.owned | second.owned == every, 30,
                           "a 2/2 split")
            await trio.to_thread.run_sync(produce, bootstrap, topic, 1000, 40, PARTITIONS)
            await wait_for(lambda: len(first.values) + len(second.values) >= 240, 30, "the 40 new records")
            inner.cancel_scope.cancel()
        nursery.cancel_scope.cancel()
    assert second.values and min(second.values) >= 1000, "the next owner re-read what was consumed"
    assert sorted(first.values + second.values) == [*range(200), *range(1000, 1040)]


async def test_a_member_expired_by_the_broker_rejoins(cluster):
    group, topic, bootstrap = "kip848-expired", "kip848-expired", cluster.bootstrap_servers
    every = await trio.to_thread.run_sync(topic_of, cluster, topic, 40)
    async with AsyncConsumer(bootstrap, **options(group)) as c:  # no commit to learn of it first
        member = Member(c, topic)
        member.subscribe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member.run)
            await wait_for(lambda: member.owned == every and len(member.values) >= 40, 30,
                           "the member to own everything and read the topic")
            member_id = c.group_metadata().member_id
            # The application stalls its event loop: no heartbeat goes out, and the broker
            # removes the member at its session timeout.
            wait_until(lambda: group_members(bootstrap, group) == [], SESSION_TIMEOUT_MS / 1000 + 20,
                       what="the broker to expire the stalled member")
            # The next heartbeat is refused: the partitions are lost and the member rejoins
            # with epoch 0 under the same member id.
            await wait_for(lambda: member.revoked and member.owned == every, 30,
                           "the member to lose its partitions and get them back")
            assert member.revoked[-1] == every
            assert c.group_metadata().member_id == member_id
            assert [m.member_id for m in group_members(bootstrap, group)] == [member_id]
            await trio.to_thread.run_sync(produce, bootstrap, topic, 2000, 8, PARTITIONS)
            await wait_for(lambda: set(range(2000, 2008)) <= set(member.values), 30, "records after the rejoin")
            nursery.cancel_scope.cancel()


async def test_sdk_and_librdkafka_consumer_protocol_members_share_a_group(cluster):
    group, topic, bootstrap = "kip848-mixed", "kip848-mixed", cluster.bootstrap_servers
    await trio.to_thread.run_sync(topic_of, cluster, topic, 200)
    rdkafka = ThreadMember(bootstrap, group, topic, **{"group.protocol": "consumer"})
    try:
        async with AsyncConsumer(bootstrap, **options(group, group_remote_assignor="range")) as c:
            sdk = Member(c, topic)
            sdk.subscribe()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sdk.run)
                await wait_for(lambda: len(sdk.owned) == 2 and len(rdkafka.assignment) == 2
                               and {tp.partition for tp in sdk.owned} | rdkafka.assignment == set(range(PARTITIONS)),
                               40, "the SDK and librdkafka members to split 4 partitions 2/2")
                assert described(bootstrap, group).assignor_name == "range"  # the SDK's group_remote_assignor
                await wait_for(lambda: len(sdk.values) + len(rdkafka.values) >= 200, 30, "every record")
                nursery.cancel_scope.cancel()
            assert sorted(sdk.values + rdkafka.values) == list(range(200))
        await wait_for(lambda: rdkafka.assignment == set(range(PARTITIONS)), 30,
                       "librdkafka to own every partition after the SDK member left")
    finally:
        await trio.to_thread.run_sync(rdkafka.stop)


async def test_a_pattern_subscription_sends_the_matching_topic_names(cluster):
    group, bootstrap = "kip848-pattern", cluster.bootstrap_servers
    every = await trio.to_thread.run_sync(topic_of, cluster, "kip848-pattern-a", 8)
    async with AsyncConsumer(bootstrap, **options(group)) as c:
        c.subscribe(pattern=r"kip848-pattern-.*")
        seen = 0
        with trio.move_on_after(30):
            while seen < 8:
                seen += sum(len(r) for r in (await c.poll(timeout_ms=100)).values())
        assert seen == 8 and c.assignment() == every
        (member,) = group_members(bootstrap, group)
        assert list(member.subscribed_topic_names) == ["kip848-pattern-a"]


async def test_a_pattern_that_matches_nothing_yet_joins_when_a_topic_appears(cluster):
    """Kafka refuses a first heartbeat with no topic names: the member waits for a match."""
    group, bootstrap = "kip848-later", cluster.bootstrap_servers
    async with AsyncConsumer(bootstrap, **options(group, metadata_max_age_ms=200)) as c:
        c.subscribe(pattern=r"kip848-later-.*")
        for _ in range(5):
            assert await c.poll(timeout_ms=100) == {}
        every = await trio.to_thread.run_sync(topic_of, cluster, "kip848-later-a", 8)
        seen = 0
        with trio.move_on_after(30):
            while seen < 8:
                seen += sum(len(r) for r in (await c.poll(timeout_ms=100)).values())
        assert seen == 8 and c.assignment() == every


def test_blocking_consumer_speaks_the_consumer_protocol(cluster):
    from raftka.client.blocking import Consumer

    every = topic_of(cluster, "kip848-blocking", 48)
    assigned: list[set] = []
    with Consumer(cluster.bootstrap_servers, **options("kip848-blocking")) as consumer:
        consumer.subscribe(["kip848-blocking"], on_partitions_assigned=assigned.append)
        seen = 0
        for _ in range(300):
            seen += sum(len(r) for r in consumer.poll(timeout_ms=100).values())
            if seen >= 48:
                break
        assert set().union(*assigned) == every and seen == 48


def test_options_are_checked():
    with pytest.raises(ValueError, match="group_protocol"):
        AsyncConsumer("127.0.0.1:9092", group_protocol="kip848")
    with pytest.raises(ValueError, match="group_remote_assignor"):
        AsyncConsumer("127.0.0.1:9092", group_remote_assignor="uniform")
