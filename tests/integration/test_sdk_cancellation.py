"""Cancelling a task inside `async with` an SDK client closes it cleanly (no corrupted nursery)."""

from __future__ import annotations

import trio

from raftka.client.admin import AsyncAdmin
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import KafkaError
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from tests.integration.sdk_broker import one_node_server


async def test_cancelled_send_poll_and_admin_calls_close_their_clients(tmp_path):
    with one_node_server(tmp_path) as bootstrap:
        async with AsyncAdmin(bootstrap) as admin:
            from raftka.client.admin import NewTopic

            await admin.create_topics([NewTopic("cancel-me", 1, 1)])
        # A consumer blocked in a long poll, cancelled from outside its `async with`.
        with trio.move_on_after(0.5) as scope:
            async with AsyncConsumer(bootstrap, auto_offset_reset="latest") as consumer:
                consumer.assign([TopicPartition("cancel-me", 0)])
                while True:
                    await consumer.poll(timeout_ms=10_000)
        assert scope.cancelled_caught
        # A producer cancelled while awaiting send() (a long linger keeps the record waiting).
        with trio.move_on_after(0.3) as scope:
            async with AsyncProducer(bootstrap, acks="all", linger_ms=10_000) as producer:
                for i in range(100):
                    producer.send_nowait("cancel-me", str(i).encode())
                await producer.send("cancel-me", b"last")
        assert scope.cancelled_caught
        # Everything still works afterwards in the same task (trio's stack is intact).
        async with AsyncProducer(bootstrap, acks="all") as producer:
            meta = await producer.send("cancel-me", b"after")
        assert meta.offset >= 0
        try:
            async with AsyncAdmin(bootstrap) as admin:
                with trio.move_on_after(0.01):
                    await admin.list_topics()
        except KafkaError:  # a cancelled request may surface as a client error; never a trio RuntimeError
            pass
