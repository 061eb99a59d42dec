"""The share groups' dead-letter queue (KIP-1191) on a real 3-node cluster: the DLQ partition is
led by another broker than the share partition (the record goes there as a Produce over the
inter-broker listener); a DLQ topic that is not fit for it (no
`errors.deadletterqueue.group.enable`) gets nothing while the rejected records are archived
anyway (the group's start offset moves past them); and a record whose DLQ write was under way
when its share partition's leader died is written by the next leader, which reads it back
ARCHIVING from the share coordinator."""

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


async def resumed(cluster, partition: int, dlq_leader: int, source_leader: int) -> None:
    bootstrap = cluster.bootstrap
    async with AsyncAdmin(bootstrap) as admin:
        await admin.alter_configs(group="dlq-resume", set_configs={"share.auto.offset.reset": "earliest",
                                                                   "errors.deadletterqueue.topic.name": "dlq.resume"})
    async with AsyncProducer(bootstrap, acks="all") as producer:
        await producer.send("dlq-res", b"bad", key=b"k", partition=partition)
    cluster.kill(dlq_leader)  # the DLQ partition (one replica) is offline: its writes retry
    alive = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != dlq_leader)
    # Acknowledged, so ARCHIVING is persisted; the leader's DLQ write is retrying.
    assert await reject_all(alive, "dlq-resume", "dlq-res", 1) == [(partition, 0)]
    cluster.kill(source_leader)  # its DLQ write dies with it, unwritten
    await trio.to_thread.run_sync(functools.partial(cluster.start_node, dlq_leader, wait=True))
    alive = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != source_leader)
    # A member's share fetch makes the partition's next leader load its state: the record is
    # ARCHIVING there and goes to the DLQ (once: the dead leader never wrote it).
    async with AsyncShareConsumer(alive, group_id="dlq-resume", acknowledgement_mode="explicit") as member, \
            AsyncConsumer(alive, auto_offset_reset="earliest") as consumer:
        member.subscribe(["dlq-res"])
        consumer.assign([TopicPartition("dlq.resume", 0)])
        got: list = []
        with trio.fail_after(WAIT_S):
            while not got:
                assert await member.poll(timeout_ms=200) == []  # the record is never delivered again
                got = sum((await consumer.poll(timeout_ms=300)).values(), [])
        assert [(r.offset, dict(r.headers)["__dlq.errors.offset"]) for r in got] == [(0, b"0")]
        assert await consumer.end_offsets([TopicPartition("dlq.resume", 0)]) == {TopicPartition("dlq.resume", 0): 1}


def test_a_dlq_write_cut_short_by_the_leaders_death_is_done_by_the_next_leader(tmp_path) -> None:
    """5 nodes: two of them die and the metadata quorum stays."""
    # Two of three replicas of the internal topics may be down: min.insync.replicas 1.
    extra = {**EXTRA, "min.insync.replicas": "1", "share.coordinator.state.topic.min.isr": "1"}
    with running_cluster(tmp_path, 5, extra=extra) as cluster:
        create_topic(cluster, "dlq.resume", 1, rf=1, configs={"min.insync.replicas": "1",
                                                              "errors.deadletterqueue.group.enable": "true"})
        create_topic(cluster, "dlq-res", 5, rf=3, configs={"min.insync.replicas": "1"})
        dlq_leader = wait_partition(cluster, "dlq.resume", lambda p: p.leader >= 0).leader
        leaders = {p: wait_partition(cluster, "dlq-res", lambda i: i.leader >= 0, partition=p)
                   for p in range(5)}
        partition, info = next((p, i) for p, i in leaders.items()
                               if i.leader != dlq_leader and dlq_leader not in i.replicas)
        trio.run(resumed, cluster, partition, dlq_leader, info.leader)
