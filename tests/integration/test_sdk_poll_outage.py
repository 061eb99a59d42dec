"""The SDK's group consumers wait out a cluster that is down altogether, as Kafka's do: poll()
returns nothing while no broker answers (it raised KafkaConnectionError, "no broker
reachable"), and after the restart the same member goes on. An application that recreated its
consumer on that error left the old member in the group until its session timed out (45 s by
default), holding its partitions: tests/integration/test_readme_layout_groups.py found it
when a whole cluster restarted under a KIP-848 group and a share group. A broker that does not
answer in time (paused here) is the same: poll() returns nothing, and the share consumer's
commit_sync() returns the timeout for each partition (it raised it, in an ExceptionGroup).

A consumer that gets its partitions, or its first positions, while nothing answers waits too
(test_consumers_that_start_during_an_outage): it raised from the group's OffsetFetch when an
assignment was installed, from ListOffsets (auto_offset_reset) when a partition had no position,
from JoinGroup when a classic member (re)joined and from the metadata request of a pattern
subscription. Kafka's poll() keeps retrying within its timeout and returns nothing; its
commitSync() raises a retriable TimeoutException, as commit() does here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
import trio

from raftka.client import group_admin
from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaTimeoutError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from raftka.client.share_consumer import AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType
from tests.compat.server_process import ServerProcess

TOPIC, GROUP, SHARE_GROUP = "outage", "outage-kip848", "outage-share"
POLLS_WHILE_DOWN = 5


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "server", properties={
        "offsets.topic.num.partitions": "1", "share.coordinator.state.topic.num.partitions": "1"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def produce(bootstrap: str, value: bytes) -> None:
    async with AsyncProducer(bootstrap) as producer:
        await producer.send(TOPIC, value)


@asynccontextmanager
async def members(bootstrap: str, request_timeout_ms: int) -> AsyncIterator[tuple[AsyncConsumer, AsyncShareConsumer]]:
    """A KIP-848 member and a share consumer (explicit acknowledgement) of TOPIC, from its start."""
    async with AsyncAdmin(bootstrap) as admin:
        await admin.alter_configs(group=SHARE_GROUP, set_configs={"share.auto.offset.reset": "earliest"})
    async with AsyncConsumer(bootstrap, group_id=GROUP, group_protocol="consumer", auto_offset_reset="earliest",
                             request_timeout_ms=request_timeout_ms) as consumer, \
            AsyncShareConsumer(bootstrap, group_id=SHARE_GROUP, acknowledgement_mode="explicit",
                               request_timeout_ms=request_timeout_ms) as share:
        consumer.subscribe([TOPIC])
        share.subscribe([TOPIC])
        yield consumer, share


async def next_values(consumer: AsyncConsumer, share: AsyncShareConsumer) -> tuple[bytes | None, bytes | None]:
    """The next record each one gets (the share consumer's accepted and committed)."""
    got, shared = None, None
    with trio.fail_after(60):
        while got is None or shared is None:
            for records in (await consumer.poll(200)).values():
                got = records[-1].value
            for r in await share.poll(200):
                shared = r.value
                share.acknowledge(r, AcknowledgeType.ACCEPT)
            if shared is not None:
                await share.commit_sync()
    return got, shared


def test_group_consumers_poll_through_a_stopped_cluster(server: ServerProcess) -> None:
    async def main() -> None:
        await produce(server.bootstrap, b"before")
        async with members(server.bootstrap, 3000) as (consumer, share):
            assert await next_values(consumer, share) == (b"before", b"before")
            await trio.to_thread.run_sync(server.stop)
            for _ in range(POLLS_WHILE_DOWN):  # each one tries the broker and gives up quietly
                assert await consumer.poll(300) == {}
                assert await share.poll(300) == []
            await trio.to_thread.run_sync(server.start)
            await produce(server.bootstrap, b"after")
            assert await next_values(consumer, share) == (b"after", b"after")
            async with AsyncAdmin(server.bootstrap) as admin:  # the same members: no one left behind
                assert len((await group_admin.describe_group(admin.cluster, GROUP)).members) == 1
                assert len((await admin.describe_share_group(SHARE_GROUP)).members) == 1

    trio.run(main)


def test_a_broker_that_does_not_answer_is_waited_out(server: ServerProcess) -> None:
    async def main() -> None:
        await produce(server.bootstrap, b"v")
        async with members(server.bootstrap, 2000) as (consumer, share):
            with trio.fail_after(60):
                records = []
                while not records:
                    records = await share.poll(200)
                while not await consumer.poll(200):
                    pass
            server._cluster.pause(1)
            try:
                for r in records:
                    share.acknowledge(r, AcknowledgeType.ACCEPT)
                results = await share.commit_sync()
                assert isinstance(results[TopicPartition(TOPIC, 0)], KafkaTimeoutError), results
                assert await consumer.poll(300) == {}
                assert await share.poll(300) == []
            finally:
                server._cluster.resume(1)

    trio.run(main)


# The next test's topic: P0 has an offset committed by every group, P1 none (auto_offset_reset).
LATE = "outage-late"
P0, P1 = TopicPartition(LATE, 0), TopicPartition(LATE, 1)
BEFORE = {P0: [b"0-0", b"0-1"], P1: [b"1-0", b"1-1"]}
AFTER = {P0: [b"0-2"], P1: [b"1-2"]}
COMMITTED = 1  # P0's: 0-0 was consumed
FROM_COMMITTED = sorted([b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"])
FROM_EARLIEST = sorted([b"0-0", *FROM_COMMITTED])
LATE_TIMEOUT_MS = 1000  # each request's; the joins give up after it


async def produce_late(bootstrap: str, values: dict[TopicPartition, list[bytes]]) -> None:
    async with AsyncProducer(bootstrap) as producer:
        for tp, vs in values.items():
            for v in vs:
                await producer.send(LATE, v, partition=tp.partition)


async def values_until(consumer: AsyncConsumer, n: int) -> list[bytes]:
    """The values `consumer` polls until it has `n` (a duplicate takes a missing one's place)."""
    got: list[bytes] = []
    with trio.fail_after(60):
        while len(got) < n:
            for records in (await consumer.poll(200)).values():
                got += [r.value for r in records if r.value is not None]
    return sorted(got)


@pytest.mark.parametrize("outage", ["stopped", "paused"])
def test_consumers_that_start_during_an_outage(server: ServerProcess, outage: str) -> None:
    """Five consumers get partitions or need positions while the cluster is down (stopped) or
    answers nothing (SIGSTOP): a KIP-848 member and a cooperative classic one whose assignment
    arrived just before (their committed offsets are fetched during the outage), an eager and
    a pattern member that subscribe during it, and a consumer without a group assigned during
    it (auto_offset_reset earliest: ListOffsets). Each poll() returns nothing, commit() and
    position() raise KafkaTimeoutError; afterwards each starts at the committed offset (P0) or
    the earliest (P1): nothing lost, nothing twice."""
    bootstrap = server.bootstrap

    def down() -> None:
        server.stop() if outage == "stopped" else server._cluster.pause(1)

    def up() -> None:
        server.start() if outage == "stopped" else server._cluster.resume(1)

    async def main() -> None:
        async with AsyncAdmin(bootstrap) as admin:
            await admin.create_topics([NewTopic(LATE, 2, 1)])
        await produce_late(bootstrap, BEFORE)
        groups = {name: f"late-{name}" for name in ("kip848", "cooperative", "eager", "pattern")}
        for group in groups.values():
            async with AsyncConsumer(bootstrap, group_id=group, enable_auto_commit=False) as committer:
                await committer.commit({P0: COMMITTED})
        async with AsyncExitStack() as stack:
            async def consumer(**kw: object) -> AsyncConsumer:
                return await stack.enter_async_context(AsyncConsumer(
                    bootstrap, auto_offset_reset="earliest", request_timeout_ms=LATE_TIMEOUT_MS,
                    fetch_max_wait_ms=100, metadata_max_age_ms=500, **kw))  # type: ignore[arg-type]

            cooperative_only = ["cooperative-sticky"]
            kip848 = await consumer(group_id=groups["kip848"], group_protocol="consumer")
            cooperative = await consumer(group_id=groups["cooperative"],
                                         partition_assignment_strategy=cooperative_only)
            eager = await consumer(group_id=groups["eager"])
            pattern = await consumer(group_id=groups["pattern"], partition_assignment_strategy=cooperative_only)
            no_group = await consumer()
            kip848.subscribe([LATE])  # the heartbeat task brings the assignment; poll() installs it
            cooperative.subscribe([LATE])
            await cooperative.poll(0)  # starts the join in the background; the next poll() installs it
            with trio.fail_after(30):
                while kip848._group.target is None or cooperative._join_outcome is None:  # type: ignore[union-attr]
                    await trio.sleep(0.05)
            await trio.to_thread.run_sync(down)
            try:
                eager.subscribe([LATE])
                pattern.subscribe(pattern="outage-l.*")
                no_group.assign([P0, P1])
                everyone = (kip848, cooperative, eager, pattern, no_group)

                async def polls_nothing(c: AsyncConsumer) -> None:
                    for _ in range(2):
                        assert await c.poll(200) == {}

                async with trio.open_nursery() as nursery:
                    for c in everyone:
                        nursery.start_soon(polls_nothing, c)
                # Kafka's commitSync() and position(): a retriable TimeoutException after their timeout.
                with pytest.raises(KafkaTimeoutError):
                    await eager.commit({P0: COMMITTED})
                with pytest.raises(KafkaTimeoutError):
                    await no_group.position(P1)
            finally:
                await trio.to_thread.run_sync(up)
            await produce_late(bootstrap, AFTER)
            results: dict[str, list[bytes]] = {}

            async def collect(name: str, c: AsyncConsumer, n: int) -> None:
                results[name] = await values_until(c, n)

            async with trio.open_nursery() as nursery:
                for name, c in (("kip848", kip848), ("cooperative", cooperative), ("eager", eager),
                                ("pattern", pattern)):
                    nursery.start_soon(collect, name, c, len(FROM_COMMITTED))
                nursery.start_soon(collect, "no_group", no_group, len(FROM_EARLIEST))
            assert results == {"kip848": FROM_COMMITTED, "cooperative": FROM_COMMITTED, "eager": FROM_COMMITTED,
                               "pattern": FROM_COMMITTED, "no_group": FROM_EARLIEST}

    trio.run(main)


# The next test: a member's poll() that must rejoin, commit before a revocation, or auto-commit
# while the broker answers nothing (SIGSTOP). Each request may wait this long for its answer:
# far longer than the test, so a poll() held by one of them would never return.
UNANSWERED_MS = 600_000
OLD, NEW = "bounded-old", "bounded-new"


def test_a_poll_that_rejoins_during_an_outage_returns_at_its_timeout(server: ServerProcess) -> None:
    """Kafka's poll() never outlasts its timeout for the group's sake: JoinGroup/SyncGroup and
    the commit before a revocation stay in flight across polls, and the auto-commit is
    asynchronous. Three members change their subscription while the broker is paused:
    - an eager member without auto-commit: its rejoin's JoinGroup gets no answer,
    - an eager member with auto-commit: the commit before it revokes its partitions gets none,
    - a KIP-848 member with auto-commit: its periodic auto-commit gets none.
    Each poll() returns nothing (they waited for the request's timeout, far past the poll's), and
    once the broker goes on, each is still the same member and reads the new topic."""
    bootstrap = server.bootstrap

    async def main() -> None:
        async with AsyncAdmin(bootstrap) as admin:
            await admin.create_topics([NewTopic(OLD, 1, 1), NewTopic(NEW, 1, 1)])
        async with AsyncProducer(bootstrap) as producer:
            await producer.send(OLD, b"old")
        groups = {"eager": "bounded-eager", "eager-committing": "bounded-committing", "kip848": "bounded-kip848"}
        async with AsyncExitStack() as stack:
            async def member(group: str, **kw: object) -> AsyncConsumer:
                c = await stack.enter_async_context(AsyncConsumer(
                    bootstrap, group_id=group, auto_offset_reset="earliest", request_timeout_ms=UNANSWERED_MS,
                    auto_commit_interval_ms=100, **kw))  # type: ignore[arg-type]
                c.subscribe([OLD])
                assert await values_until(c, 1) == [b"old"]
                return c

            consumers = {
                "eager": await member(groups["eager"], enable_auto_commit=False),
                "eager-committing": await member(groups["eager-committing"]),
                "kip848": await member(groups["kip848"], group_protocol="consumer"),
            }
            member_ids = {name: c._group.member_id for name, c in consumers.items()}  # type: ignore[union-attr]
            # The KIP-848 member keeps OLD: it fetches nothing from it, so only its group work can
            # meet the paused broker (a Fetch without an answer is left alone here).
            consumers["kip848"].pause(TopicPartition(OLD, 0))
            server._cluster.pause(1)
            try:
                async def polls_nothing(c: AsyncConsumer) -> None:
                    c.subscribe([OLD, NEW])
                    with trio.fail_after(60):  # a poll held by a request would wait UNANSWERED_MS
                        for _ in range(3):
                            assert await c.poll(200) == {}

                async with trio.open_nursery() as nursery:
                    for c in consumers.values():
                        nursery.start_soon(polls_nothing, c)
                assert consumers["eager"]._join_scope is not None  # its join is still out
                assert consumers["eager-committing"]._revoke_commit is not None  # its commit is still out
                assert consumers["kip848"]._auto_committing  # its auto-commit is still out
            finally:
                server._cluster.resume(1)
            async with AsyncProducer(bootstrap) as producer:
                await producer.send(NEW, b"new")
            # The committing members committed OLD's offset before they let it go; the other starts over.
            expected = {"eager": [b"new", b"old"], "eager-committing": [b"new"], "kip848": [b"new"]}
            for name, c in consumers.items():
                assert await values_until(c, len(expected[name])) == expected[name], name
            async with AsyncAdmin(bootstrap) as admin:
                for name, c in consumers.items():
                    assert c._group.member_id == member_ids[name], name  # type: ignore[union-attr]
                    view = await group_admin.describe_group(admin.cluster, groups[name])
                    assert [m.member_id for m in view.members] == [member_ids[name]], name

    trio.run(main)
