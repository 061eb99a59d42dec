"""The SDK share consumer's ShareFetches run in the background, one per leader (client/share_consumer.py),
on a real 2-node raftka cluster:

- poll() returns the records one leader gave while its ShareFetch to the other leader (with
  nothing to give) still long-polls: the consumer does not wait for every leader's answer;
- the records that long poll acquires later (at least the first one produced: it was waiting for
  it) are the member's, and no poll() returned them: close() gives them back (RELEASE), so the
  next member gets them at once, on their second delivery (the acquisition counted), and what the
  first member was given (implicitly accepted) never again.

Before, poll() waited for every leader's answer: the first poll() would have waited out the other
leader's long poll, and the records produced afterwards would have reached the next member on
their first delivery.
"""

from __future__ import annotations

from raftka.client.blocking import Admin, Producer, ShareConsumer
from raftka.client.records import ShareConsumerRecord
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    running_cluster,
    wait_partition,
)
from tests.support import wait_until

TOPIC, GROUP = "sbg", "share-background"
PARTITIONS = 4
LONG_POLL_MS = 20_000  # the other leader's ShareFetch waits this long for records


def _poll_until(consumer: ShareConsumer, count: int) -> list[ShareConsumerRecord]:
    got: list[ShareConsumerRecord] = []

    def enough() -> bool:
        got.extend(consumer.poll(500))
        return len(got) >= count

    wait_until(enough, timeout=60, interval=0, what=f"{count} records")
    return got


def test_a_long_poll_on_one_leader_holds_up_nothing_and_its_records_go_back_at_close(tmp_path) -> None:
    with running_cluster(tmp_path, 2) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, 1)
        leaders = {p: wait_partition(cluster, TOPIC, lambda i: i.leader >= 0, partition=p).leader
                   for p in range(PARTITIONS)}
        first = 0
        other = next(p for p in range(PARTITIONS) if leaders[p] != leaders[first])
        bootstrap = bootstrap_of(cluster)
        with Admin(bootstrap) as admin:
            admin.alter_configs(group=GROUP, set_configs={"share.auto.offset.reset": "earliest"})
        with Producer(bootstrap) as producer:
            for i in range(5):
                producer.send_and_wait(TOPIC, b"first-%d" % i, partition=first)

            member = ShareConsumer(bootstrap, group_id=GROUP, fetch_max_wait_ms=LONG_POLL_MS)
            try:
                member.subscribe([TOPIC])
                # One poll() long enough for the other leader's long poll: it returns with the
                # first leader's records all the same.
                given = member.poll(LONG_POLL_MS)
                while len(given) < 5:  # the share partitions may come up one round apart
                    given += member.poll(LONG_POLL_MS)
                assert {(r.partition, r.value) for r in given} == {(first, b"first-%d" % i) for i in range(5)}
                # Acquired by the other leader's long poll (at least the first: it was waiting),
                # returned by no poll().
                for i in range(3):
                    producer.send(TOPIC, b"other-%d" % i, partition=other)
                producer.flush()
            finally:
                member.close()

        with ShareConsumer(bootstrap, group_id=GROUP) as after:
            after.subscribe([TOPIC])
            again = _poll_until(after, 3)
        assert sorted((r.partition, r.value) for r in again) == [(other, b"other-%d" % i) for i in range(3)]
        counts = {r.value: r.delivery_count for r in again}
        assert counts[b"other-0"] == 2, counts
        assert set(counts.values()) <= {1, 2}, counts
