"""The SDK's share consumer (KIP-932 share groups, Kafka's queues) against a real broker: records
split between members, RELEASE, REJECT, delivery counts, the acknowledgement modes, the
dead-letter queue (KIP-1191) and `raftka share-groups`.

The same test bodies run against every target `share_bootstrap` is parametrized with: Apache
Kafka 4.4 (one node, share groups on by default: `share.version` is finalized) and a one-node
raftka cluster with the same settings. The tests marked `compat_full` run in
`make compat` only; the rest run in `make test` too.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
import trio

from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.blocking import ShareConsumer
from raftka.client.consumer import AsyncConsumer
from raftka.client.errors import IllegalStateError
from raftka.client.producer import AsyncProducer
from raftka.client.records import ShareConsumerRecord, TopicPartition
from raftka.client.share_consumer import AsyncShareConsumer
from raftka.client.share_records import AcknowledgeType
from raftka.testing.local_cluster import LocalCluster
from tests.differential.conftest import SHARED_SETTINGS
from tests.differential.kafka_jars import KafkaJars
from tests.differential.kafka_server import KafkaDidNotStart, running_kafka

pytestmark = pytest.mark.timeout(300)

# make test runs the bodies against raftka; make compat against Kafka 4.4 too (its JVM is slow
# to start on 2 cores, and the differential suite's bounded part already runs one).
TARGETS = [pytest.param("kafka", marks=pytest.mark.compat_full), "raftka"]
# Both clusters: heartbeats every second (Kafka's default 5 s makes every join take 5 s: a
# share group member is assigned at its second heartbeat, once the share partitions exist).
SHARE_SETTINGS = {
    **SHARED_SETTINGS,
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}

WAIT_S = 60.0  # an upper bound for a step that normally takes a second or two
_names = count()


@pytest.fixture(scope="module", params=TARGETS)
def share_bootstrap(request, jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap address of a one-node cluster serving share groups; stopped at the end."""
    if request.param == "raftka":
        cluster = LocalCluster(tmp_path_factory.mktemp("raftka-share"), 1, log_level="WARNING",
                               extra_config=SHARE_SETTINGS)
        try:
            cluster.start_and_wait(60)
            yield cluster.bootstrap
        finally:
            cluster.stop(timeout=15)
        return
    try:
        with running_kafka(tmp_path_factory.mktemp("kafka-share"), jars, SHARE_SETTINGS) as server:
            yield server.bootstrap
    except KafkaDidNotStart as exc:
        pytest.fail(f"Kafka 4.4 did not start: {exc}", pytrace=False)


async def share_topic(bootstrap: str, records: int, *, partitions: int = 1, per_batch: int = 10,
                      group_configs: dict[str, str] | None = None) -> tuple[str, str]:
    """A new topic with `records` records (values b"0", b"1", ...; one batch per `per_batch`) and
    a share group reading it from the earliest offset: (topic, group)."""
    n = next(_names)
    topic, group = f"share-{n}", f"share-group-{n}"
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
        await admin.alter_configs(group=group, set_configs={"share.auto.offset.reset": "earliest",
                                                            **(group_configs or {})})
    await produce(bootstrap, topic, range(records), per_batch=per_batch)
    return topic, group


async def produce(bootstrap: str, topic: str, values, *, per_batch: int = 10) -> None:
    async with AsyncProducer(bootstrap, acks="all") as producer:
        for i, value in enumerate(values):
            await producer.send(topic, str(value).encode(), partition=0)
            if (i + 1) % per_batch == 0:
                await producer.flush()  # the next records go in a new batch


async def poll_some(consumer: AsyncShareConsumer) -> list[ShareConsumerRecord]:
    """The next non-empty poll (the first ones wait for the member's assignment)."""
    with trio.fail_after(WAIT_S):
        while True:
            records = await consumer.poll(timeout_ms=500)
            if records:
                return records


def values(records) -> list[int]:
    return [int(r.value) for r in records]


async def test_two_members_split_the_records_and_none_is_given_to_both(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 60)
    seen: dict[int, list[ShareConsumerRecord]] = {}
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit",
                                  max_poll_records=10) as a, \
            AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit",
                               max_poll_records=10) as b:
        a.subscribe([topic])
        b.subscribe([topic])
        with trio.fail_after(WAIT_S):
            while len(seen) < 60:
                # Each member holds what it got (locked to it) while the other polls.
                got_a = await poll_some(a)
                got_b = await b.poll(timeout_ms=1000)
                held_a = {r.offset for r in got_a}
                assert not held_a & {r.offset for r in got_b}, "a record was given to both members"
                for r in got_a + got_b:
                    assert r.offset not in seen, f"offset {r.offset} delivered again after it was accepted"
                    seen[r.offset] = [r]
                for consumer, got in ((a, got_a), (b, got_b)):
                    for r in got:
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    # ShareAcknowledge answers per partition: None, no error.
                    assert await consumer.commit_sync() == ({TopicPartition(topic, 0): None} if got else {})
    assert sorted(seen) == list(range(60))
    assert {r.delivery_count for (r,) in seen.values()} == {1}


async def test_a_released_record_comes_back_with_a_higher_delivery_count(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 5)
    counts = []
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(WAIT_S):
            while len(counts) < 3:
                for r in await poll_some(consumer):
                    if r.value == b"2":
                        counts.append(r.delivery_count)
                        consumer.acknowledge(r, AcknowledgeType.RELEASE if len(counts) < 3 else AcknowledgeType.ACCEPT)
                    else:
                        assert r.delivery_count == 1, f"{r} was accepted, yet delivered again"
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
    assert counts == [1, 2, 3]


async def test_a_rejected_record_is_never_delivered_again(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 5)
    delivered = []
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        for r in await poll_some(consumer):
            delivered.append(int(r.value))
            consumer.acknowledge(r, AcknowledgeType.REJECT if r.value == b"1" else AcknowledgeType.ACCEPT)
        assert (await consumer.commit_sync()) and 1 in delivered
        # A record released now would come back before anything newer: read up to a sentinel.
        await produce(share_bootstrap, topic, ["99"])
        with trio.fail_after(WAIT_S):
            while 99 not in delivered:
                for r in await poll_some(consumer):
                    delivered.append(int(r.value))
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT)
    assert delivered.count(1) == 1, f"the rejected record came back: {delivered}"


@pytest.mark.compat_full
async def test_a_record_released_too_often_stops_at_the_delivery_limit(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 3, group_configs={"share.delivery.count.limit": "2"})
    counts: list[int] = []  # the delivery counts record 0 arrived with
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(WAIT_S):
            sentinel = False
            while not sentinel:
                if len(counts) == 2:  # released at the limit: archived; a newer record still comes
                    await produce(share_bootstrap, topic, ["99"])
                for r in await poll_some(consumer):
                    counts += [r.delivery_count] if r.value == b"0" else []
                    sentinel = sentinel or r.value == b"99"
                    consumer.acknowledge(r, AcknowledgeType.RELEASE if r.value == b"0" else AcknowledgeType.ACCEPT)
                await consumer.commit_sync()
    assert counts == [1, 2], f"a poisoned record is delivered share.delivery.count.limit times: {counts}"


async def read_topic(bootstrap: str, topic: str, n: int) -> list:
    """The first `n` records of partition 0 of `topic` (a plain consumer, from the start)."""
    got: list = []
    async with AsyncConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with trio.fail_after(WAIT_S):
            while len(got) < n:
                for records in (await consumer.poll(timeout_ms=500)).values():
                    got += records
    return got


def dlq_headers(topic: str, offset: int, group: str, delivery_count: int, message: str) -> list:
    return [("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", b"0"),
            ("__dlq.errors.offset", str(offset).encode()), ("__dlq.errors.group", group.encode()),
            ("__dlq.errors.delivery.count", str(delivery_count).encode()),
            ("__dlq.errors.message", message.encode())]


REJECTED = "Offset rejected by client."
LIMIT = "Offset delivery count exceeded the threshold."


async def test_rejected_and_poisoned_records_reach_the_groups_dead_letter_queue(share_bootstrap: str) -> None:
    """KIP-1191: a record REJECTed, and one released until the delivery count limit, are written
    to the group's DLQ topic with the __dlq.errors.* headers (key and value copied with
    errors.deadletterqueue.copy.record.enable; the record's own headers never are)."""
    n = next(_names)
    topic, group, dlq = f"dlq-src-{n}", f"dlq-group-{n}", f"dlq.src-{n}"
    async with AsyncAdmin(share_bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1),
                                   NewTopic(dlq, 1, 1, {"errors.deadletterqueue.group.enable": "true"})])
        await admin.alter_configs(group=group, set_configs={
            "share.auto.offset.reset": "earliest", "share.delivery.count.limit": "2",
            "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.copy.record.enable": "true"})
    async with AsyncProducer(share_bootstrap, acks="all") as producer:
        for i, value in enumerate((b"bad-0", b"bad-1", b"poison")):
            await producer.send(topic, value, key=f"k{i}".encode(), headers=[("h", b"mine")], partition=0)
    delivered: list[tuple[bytes, int]] = []
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(WAIT_S):
            while (b"poison", 2) not in delivered:
                for r in await poll_some(consumer):
                    delivered.append((r.value, r.delivery_count))
                    consumer.acknowledge(r, AcknowledgeType.RELEASE if r.value == b"poison" else AcknowledgeType.REJECT)
                await consumer.commit_sync()
    assert delivered == [(b"bad-0", 1), (b"bad-1", 1), (b"poison", 1), (b"poison", 2)]
    got = await read_topic(share_bootstrap, dlq, 3)
    assert [(r.key, r.value) for r in got] == [(b"k0", b"bad-0"), (b"k1", b"bad-1"), (b"k2", b"poison")]
    assert [list(r.headers) for r in got] == [dlq_headers(topic, 0, group, 1, REJECTED),
                                              dlq_headers(topic, 1, group, 1, REJECTED),
                                              dlq_headers(topic, 2, group, 2, LIMIT)]


async def test_a_missing_dead_letter_queue_topic_is_created_when_the_broker_allows_it(share_bootstrap: str) -> None:
    """errors.deadletterqueue.auto.create.topics.enable (a dynamic broker config, false by default):
    the DLQ topic is created at the first record for it, with errors.deadletterqueue.group.enable
    and CreateTime; without copy.record.enable the DLQ record has no key and no value."""
    n = next(_names)
    topic, group, dlq = f"dlq-auto-src-{n}", f"dlq-auto-group-{n}", f"dlq.auto-{n}"
    async with AsyncAdmin(share_bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.alter_configs(broker_default=True,
                                  set_configs={"errors.deadletterqueue.auto.create.topics.enable": "true"})
        try:
            await admin.alter_configs(group=group, set_configs={"share.auto.offset.reset": "earliest",
                                                                "errors.deadletterqueue.topic.name": dlq})
            await produce(share_bootstrap, topic, ["0"])
            async with AsyncShareConsumer(share_bootstrap, group_id=group,
                                          acknowledgement_mode="explicit") as consumer:
                consumer.subscribe([topic])
                for r in await poll_some(consumer):
                    consumer.acknowledge(r, AcknowledgeType.REJECT)
                await consumer.commit_sync()
            with trio.fail_after(WAIT_S):
                while dlq not in await admin.list_topics():
                    await trio.sleep(0.2)  # polling the metadata until the broker created it
            [record] = await read_topic(share_bootstrap, dlq, 1)
            assert (record.key, record.value) == (None, None)
            assert list(record.headers) == dlq_headers(topic, 0, group, 1, REJECTED)
            described = await admin.describe_configs(dlq, keys=["errors.deadletterqueue.group.enable",
                                                                "message.timestamp.type"])
            assert {k: e.value for k, e in described.items()} == {"errors.deadletterqueue.group.enable": "true",
                                                                  "message.timestamp.type": "CreateTime"}
        finally:
            await admin.alter_configs(broker_default=True, delete=["errors.deadletterqueue.auto.create.topics.enable"])


async def test_explicit_mode_refuses_a_poll_before_every_record_is_acknowledged(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 3)
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        first, *rest = await poll_some(consumer)
        consumer.acknowledge(first)
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            await consumer.poll(0)
        with pytest.raises(IllegalStateError, match="not a record of the last poll"):
            consumer.acknowledge(first)
        for r in rest:
            consumer.acknowledge(r)
        assert await consumer.poll(0) == []


@pytest.mark.compat_full
def test_implicit_mode_accepts_what_was_polled_and_an_unacknowledged_record_goes_to_another_member(
        share_bootstrap: str) -> None:
    """The blocking facade: implicit acceptance at close; in explicit mode, what a member closed
    without acknowledging is delivered to the next one, one delivery later."""
    topic, group = trio.run(functools.partial(share_topic, share_bootstrap, 4, per_batch=1))

    def poll_until(consumer: ShareConsumer, n: int) -> list[ShareConsumerRecord]:
        got: list[ShareConsumerRecord] = []
        for _ in range(int(WAIT_S * 2)):  # bounded: WAIT_S of half-second polls
            got += consumer.poll(500)
            if len(got) >= n:
                return got
        raise AssertionError(f"{len(got)} of {n} records within {WAIT_S:.0f}s")

    with ShareConsumer(share_bootstrap, group_id=group, max_poll_records=1) as implicit:
        implicit.subscribe([topic])
        first = poll_until(implicit, 1)
        assert len(first) < 4
        with pytest.raises(IllegalStateError, match="explicit"):
            implicit.acknowledge(first[0])
    accepted = {r.offset for r in first}
    with ShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as holder:
        holder.subscribe([topic])
        held = poll_until(holder, 4 - len(accepted))  # closed without acknowledging: released
    assert not accepted & {r.offset for r in held}
    with ShareConsumer(share_bootstrap, group_id=group) as taker:
        taker.subscribe([topic])
        again = poll_until(taker, len(held))
    assert {r.offset for r in again} == {r.offset for r in held}
    assert {r.delivery_count for r in again} == {2}


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftka", "share-groups", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=120)


async def raftka_share_groups(bootstrap: str, *args: str) -> list[list[str]]:
    """`raftka share-groups ARGS` (exit 0 expected): its output's lines, split into words."""
    done = await trio.to_thread.run_sync(functools.partial(cli, bootstrap, *args))
    assert done.returncode == 0, f"raftka share-groups {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


async def test_raftka_share_groups_describes_members_state_and_start_offsets(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 6)
    async with AsyncShareConsumer(share_bootstrap, group_id=group, client_id="describer") as consumer:
        consumer.subscribe([topic])
        assert len(await poll_some(consumer)) == 6
        await consumer.commit_sync()
        assert await raftka_share_groups(share_bootstrap, "describe", "--group", group, "--members") == [
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [group, consumer.member_id, "/127.0.0.1", "describer", "1", f"{topic}:0"]]
        (header, (name, _coordinator, node, state, members)) = await raftka_share_groups(
            share_bootstrap, "describe", "--group", group, "--state")
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert (name, node, state, members) == (group, "(1)", "Stable", "1")
    # Every record is accepted: no lag. (Kafka moves the start offset it reports lazily: 0 to 6.)
    (header, (name, in_topic, partition, start, lag)) = await raftka_share_groups(
        share_bootstrap, "describe", "--group", group)
    assert header == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    assert (name, in_topic, partition, lag) == (group, topic, "0", "0") and 0 <= int(start) <= 6
    assert [group, "Empty"] in await raftka_share_groups(share_bootstrap, "list", "--state")


@pytest.mark.compat_full
async def test_raftka_share_groups_resets_offsets_and_deletes(share_bootstrap: str) -> None:
    topic, group = await share_topic(share_bootstrap, 4)
    async with AsyncShareConsumer(share_bootstrap, group_id=group) as consumer:
        consumer.subscribe([topic])
        assert len(await poll_some(consumer)) == 4
    before = await raftka_share_groups(share_bootstrap, "describe", "--group", group)
    dry = await raftka_share_groups(share_bootstrap, "reset-offsets", "--group", group, "--topic", topic,
                                    "--to-earliest")
    assert dry == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic, "0", "0"]]
    assert await raftka_share_groups(share_bootstrap, "describe", "--group", group) == before, \
        "a dry run changed the offsets"
    await raftka_share_groups(share_bootstrap, "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                              "--execute")
    async with AsyncShareConsumer(share_bootstrap, group_id=group) as consumer:
        consumer.subscribe([topic])
        again = await poll_some(consumer)
        assert values(again) == [0, 1, 2, 3]
    await raftka_share_groups(share_bootstrap, "delete", "--group", group)
    done = await trio.to_thread.run_sync(functools.partial(cli, share_bootstrap, "describe", "--group", group))
    assert done.returncode == 1 and "GROUP_ID_NOT_FOUND" in done.stderr


def test_the_share_group_snippet_of_using_clients_runs_as_shown(share_bootstrap: str, tmp_path) -> None:
    """docs/using-clients.md's share-group block, with only the address (and, the cluster being
    shared, the topic and group names) changed."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "using-clients.md").read_text()
    section = text[text.index("\n## Share groups"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    n = next(_names)
    code = (code.replace("127.0.0.1:9092", share_bootstrap).replace('"jobs"', f'"jobs-{n}"')
            .replace('"workers"', f'"workers-{n}"'))
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["done", "10"]


async def test_the_dead_letter_queue_snippet_of_using_clients_runs_as_shown(share_bootstrap: str, tmp_path) -> None:
    """docs/using-clients.md's dead-letter queue block (names made unique): then a rejected
    record of the group lands in the DLQ topic with its key and value."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "using-clients.md").read_text()
    section = text[text.index("\n### A dead-letter queue"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    n = next(_names)
    topic, group, dlq = f"jobs-{n}", f"workers-{n}", f"dlq.jobs-{n}"
    code = code.replace("127.0.0.1:9092", share_bootstrap).replace('"dlq.jobs"', f'"{dlq}"').replace(
        '"workers"', f'"{group}"')
    ran = await trio.run_process([sys.executable, "-c", code], capture_stderr=True, cwd=tmp_path, check=False)
    assert ran.returncode == 0, ran.stderr
    async with AsyncAdmin(share_bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.alter_configs(group=group, set_configs={"share.auto.offset.reset": "earliest"})
    async with AsyncProducer(share_bootstrap, acks="all") as producer:
        await producer.send(topic, b"job-0", key=b"id-0", partition=0)
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        for r in await poll_some(consumer):
            consumer.acknowledge(r, AcknowledgeType.REJECT)
        await consumer.commit_sync()
    [record] = await read_topic(share_bootstrap, dlq, 1)
    assert (record.key, record.value) == (b"id-0", b"job-0")
    assert list(record.headers) == dlq_headers(topic, 0, group, 1, REJECTED)


@pytest.mark.compat_full
async def test_a_member_joining_takes_over_a_partition_and_nothing_is_lost_or_given_twice(
        share_bootstrap: str) -> None:
    """Two partitions, one member holding records (unacknowledged) while a second one joins and
    the partitions are split between them: the held records stay the first member's, and every
    record is delivered once."""
    topic, group = await share_topic(share_bootstrap, 0, partitions=2)
    async with AsyncProducer(share_bootstrap, acks="all") as producer:
        for i in range(40):
            await producer.send(topic, str(i).encode(), partition=i % 2)
    seen: list[ShareConsumerRecord] = []
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as a:
        a.subscribe([topic])
        with trio.fail_after(WAIT_S):
            while {r.partition for r in seen} != {0, 1}:
                held = await poll_some(a)  # records of both partitions, held while b joins
                seen += held
                if {r.partition for r in seen} != {0, 1}:
                    for r in held:
                        a.acknowledge(r)
        async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as b:
            b.subscribe([topic])
            with trio.fail_after(WAIT_S):
                while len(a.assignment()) != 1 or not b.assignment():
                    for r in await b.poll(timeout_ms=200):
                        seen.append(r)
                        b.acknowledge(r)
            for r in held:
                a.acknowledge(r)
            with trio.fail_after(WAIT_S):
                while len(seen) < 40:
                    for consumer in (a, b):
                        for r in await consumer.poll(timeout_ms=200):
                            seen.append(r)
                            consumer.acknowledge(r)
    assert sorted(int(r.value) for r in seen) == list(range(40))
    assert {r.delivery_count for r in seen} == {1}


@pytest.mark.compat_full
async def test_records_of_a_partition_dropped_from_the_assignment_are_acknowledged_before_it_is_forgotten(
        share_bootstrap: str) -> None:
    """A member holds records of topic y, then subscribes to x alone: acknowledged after the
    assignment dropped y, they are sent in the share session before y leaves it (if they were
    lost, the member's leaving would give them back to the group)."""
    x, group = await share_topic(share_bootstrap, 5)
    y = f"{x}-y"
    async with AsyncAdmin(share_bootstrap) as admin:
        await admin.create_topics([NewTopic(y, 1, 1)])
    await produce(share_bootstrap, y, range(5))
    async with AsyncShareConsumer(share_bootstrap, group_id=group, acknowledgement_mode="explicit") as a:
        a.subscribe([x, y])
        with trio.fail_after(WAIT_S):
            held: list[ShareConsumerRecord] = []
            while not held:
                for r in await poll_some(a):
                    if r.topic == y:
                        held.append(r)
                    else:
                        a.acknowledge(r)
            a.subscribe([x])
            while {tp.topic for tp in a.assignment()} != {x}:
                await trio.sleep(0.05)  # the next heartbeat brings the new assignment
        for r in held:
            a.acknowledge(r)
        await a.poll(timeout_ms=500)  # acknowledges y's records, then forgets y
    await produce(share_bootstrap, y, ["99"])
    after: list[int] = []
    async with AsyncShareConsumer(share_bootstrap, group_id=group) as c:
        c.subscribe([y])
        with trio.fail_after(WAIT_S):
            while 99 not in after:
                after += values(await poll_some(c))
    assert not set(values(held)) & set(after), f"held {values(held)}, delivered again: {after}"
