"""The SDK's group consumers wait out a cluster that is down altogether, as Kafka's do: poll()
returns nothing while no broker answers (it raised KafkaConnectionError, "no broker
reachable"), and after the restart the same member goes on. An application that recreated its
consumer on that error left the old member in the group until its session timed out (45 s by
default), holding its partitions: tests/integration/test_readme_layout_groups.py found it
when a whole cluster restarted under a KIP-848 group and a share group. A broker that does not
answer in time (paused here) is the same: poll() returns nothing, and the share consumer's
commit_sync() returns the timeout for each partition (it raised it, in an ExceptionGroup)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from raftka.client import group_admin
from raftka.client.admin import AsyncAdmin
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
