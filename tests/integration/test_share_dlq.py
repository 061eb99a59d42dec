"""The share groups' dead-letter queue (KIP-1191) on a real 3-node cluster: the DLQ partition is
led by another broker than the share partition (the record goes there as a Produce over the
inter-broker listener), and a DLQ topic that is not fit for it (no
`errors.deadletterqueue.group.enable`) gets nothing while the rejected records are archived
anyway: the group's start offset moves past them."""

from __future__ import annotations

import functools

import trio

from raftka.client.admin import AsyncAdmin
from raftka.client.consumer import AsyncConsumer
from raftka.client.producer import AsyncProducer
from raftka.client.records import TopicPartition
from raftka.client.share_consumer import AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType
from tests.integration.cluster_support import create_topic, running_cluster, wait_partition

WAIT_S = 60.0
EXTRA = {"group.share.min.heartbeat.interval.ms": "1000", "group.share.heartbeat.interval.ms": "1000",
         "share.coordinator.state.topic.num.partitions": "1"}


async def reject_all(bootstrap: str, group: str, topic: str, n: int) -> list[tuple[int, int]]:
    """A share consumer rejects the first `n` records of `topic`: their (partition, offset)."""
    rejected: list[tuple[int, int]] = []
    async with AsyncShareConsumer(bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(WAIT_S):
            while len(rejected) < n:
                for r in await consumer.poll(timeout_ms=500):
                    rejected.append((r.partition, r.offset))
                    consumer.acknowledge(r, AcknowledgeType.REJECT)
                await consumer.commit_sync()
    return rejected


async def scenario(bootstrap: str, source_partition: int) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        for group, dlq in (("dlq-remote", "dlq.remote"), ("dlq-unfit", "dlq.unfit")):
            await admin.alter_configs(group=group, set_configs={"share.auto.offset.reset": "earliest",
                                                                "errors.deadletterqueue.topic.name": dlq})
        async with AsyncProducer(bootstrap, acks="all") as producer:
            await producer.send("dlq-src", b"bad", key=b"k", partition=source_partition)
            await producer.send("dlq-src-2", b"bad-0", partition=0)
            await producer.send("dlq-src-2", b"bad-1", partition=0)

        assert await reject_all(bootstrap, "dlq-remote", "dlq-src", 1) == [(source_partition, 0)]
        async with AsyncConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("dlq.remote", 0)])
            got: list = []
            with trio.fail_after(WAIT_S):
                while not got:
                    got = sum((await consumer.poll(timeout_ms=500)).values(), [])
        [record] = got
        assert (record.key, record.value) == (None, None)  # copy.record.enable is false by default
        assert dict(record.headers) == {
            "__dlq.errors.topic": b"dlq-src", "__dlq.errors.partition": str(source_partition).encode(),
            "__dlq.errors.offset": b"0", "__dlq.errors.group": b"dlq-remote", "__dlq.errors.delivery.count": b"1",
            "__dlq.errors.message": b"Offset rejected by client."}

        # An unfit DLQ topic: the write is refused, the records are archived all the same.
        assert await reject_all(bootstrap, "dlq-unfit", "dlq-src-2", 2) == [(0, 0), (0, 1)]
        with trio.fail_after(WAIT_S):
            while True:
                [offsets] = await admin.describe_share_group_offsets("dlq-unfit", {"dlq-src-2": [0]})
                if offsets.start_offset == 2:
                    break
                await trio.sleep(0.2)  # polling the group's start offset until it moves past both
        async with AsyncConsumer(bootstrap) as consumer:
            assert await consumer.end_offsets([TopicPartition("dlq.unfit", 0)]) == {TopicPartition("dlq.unfit", 0): 0}


def test_a_dlq_partition_led_elsewhere_and_an_unfit_dlq_topic(tmp_path) -> None:
    with running_cluster(tmp_path, 3, extra=EXTRA) as cluster:
        one = {"min.insync.replicas": "1"}
        create_topic(cluster, "dlq.remote", 1, rf=1, configs={**one, "errors.deadletterqueue.group.enable": "true"})
        create_topic(cluster, "dlq.unfit", 1, rf=1, configs=one)
        create_topic(cluster, "dlq-src-2", 1, rf=1, configs=one)
        create_topic(cluster, "dlq-src", 3, rf=1, configs=one)
        dlq_leader = wait_partition(cluster, "dlq.remote", lambda p: p.leader >= 0).leader
        leaders = {p: wait_partition(cluster, "dlq-src", lambda i: i.leader >= 0, partition=p).leader
                   for p in range(3)}
        elsewhere = [p for p, leader in leaders.items() if leader != dlq_leader]
        assert elsewhere, f"every partition of dlq-src is led by {dlq_leader}, as dlq.remote's only one"
        trio.run(functools.partial(scenario, cluster.bootstrap, elsewhere[0]))
