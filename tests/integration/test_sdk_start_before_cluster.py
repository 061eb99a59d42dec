"""The SDK's clients start while the cluster is down, as Kafka's Java clients do: start() (and the
blocking facades' constructors) used to raise KafkaConnectionError ("no broker reachable"), so an
application that came up before its cluster had to recreate its clients. Now each call waits
within its own bound, and the clients go on once the cluster is up:

- the producer: a record waits for its topic's metadata up to `max_block_ms` (Kafka's send()),
- the consumer: poll() returns nothing until the cluster answers; it never raises for that,
- the admin: a call waits for a broker to answer up to `default_api_timeout_ms`.

And a cluster that never comes up gives each bound's KafkaTimeoutError (small bounds here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.blocking import Admin, Consumer, Producer
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaTimeoutError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from tests.compat.server_process import ServerProcess

PROPERTIES = {"offsets.topic.num.partitions": "1"}


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A one-node server whose ports are chosen, not started yet."""
    server = ServerProcess(tmp_path / "server", properties=PROPERTIES)
    try:
        yield server
    finally:
        server.stop()


async def first_value(consumer: AsyncConsumer) -> bytes | None:
    with trio.fail_after(60):
        while True:
            for records in (await consumer.poll(200)).values():
                return records[0].value


def test_clients_started_before_the_cluster_go_on_once_it_is_up(server: ServerProcess) -> None:
    """Producer, consumer and admin start with the cluster down; a send, an admin call and polls
    are under way when it starts; each completes with the same client objects."""
    async def main() -> None:
        bootstrap = server.bootstrap
        async with AsyncAdmin(bootstrap) as admin, AsyncProducer(bootstrap) as producer, \
                AsyncConsumer(bootstrap, group_id="early", auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["early"])
            assert await consumer.poll(100) == {}  # nobody answers: nothing, no error
            sent = producer.send_nowait("early", b"sent while down")  # auto-creates the topic later
            async with trio.open_nursery() as nursery:
                topics: list[str] = []

                async def create_and_list() -> None:  # waits for a broker to answer
                    await admin.create_topics([NewTopic("made-while-down", 1, 1)])
                    topics.extend(await admin.list_topics())

                nursery.start_soon(create_and_list)
                await trio.to_thread.run_sync(server.start)
            assert {"early", "made-while-down"} <= set(topics), topics
            with trio.fail_after(60):
                assert (await sent).offset == 0
            assert await first_value(consumer) == b"sent while down"

    trio.run(main)


def test_blocking_clients_constructed_before_the_cluster(server: ServerProcess) -> None:
    """The blocking facades' constructors return with the cluster down; once it is up, they work."""
    with Admin(server.bootstrap) as admin, Producer(server.bootstrap) as producer, \
            Consumer(server.bootstrap, auto_offset_reset="earliest") as consumer:
        server.start()
        admin.create_topics([NewTopic("blocking", 1, 1)])
        assert producer.send("blocking", b"v").result(timeout=60).offset == 0
        assert producer.partitions_for("blocking") == [0]
        consumer.assign([TopicPartition("blocking", 0)])
        got: list[bytes | None] = []
        for _ in range(300):
            got = [r.value for records in consumer.poll(200).values() for r in records]
            if got:
                break
        assert got == [b"v"]


def test_a_cluster_that_never_comes_up_gives_each_bounds_timeout(server: ServerProcess) -> None:
    async def main() -> None:
        bootstrap = server.bootstrap  # never started
        async with AsyncProducer(bootstrap, max_block_ms=300) as producer:
            with pytest.raises(KafkaTimeoutError, match=r"not in metadata after 300 ms \(max_block_ms\)"):
                await producer.send("nowhere", b"v")
            with pytest.raises(KafkaTimeoutError, match="not available within 0.3s"):
                await producer.partitions_for("nowhere")
        async with AsyncAdmin(bootstrap, default_api_timeout_ms=300) as admin:
            with pytest.raises(KafkaTimeoutError, match=r"no broker reachable within 300 ms \(default_api_timeout_ms\)"):
                await admin.list_topics()
            with pytest.raises(KafkaTimeoutError, match="default_api_timeout_ms"):
                await admin.describe_configs(broker_id=1)
        async with AsyncConsumer(bootstrap, group_id="never", request_timeout_ms=300) as consumer:
            consumer.subscribe(["nowhere"])
            for _ in range(3):
                assert await consumer.poll(100) == {}
            with pytest.raises(KafkaTimeoutError):  # Kafka's commitSync(): a retriable TimeoutException
                await consumer.committed(("nowhere", 0))  # type: ignore[arg-type]

    trio.run(main)
