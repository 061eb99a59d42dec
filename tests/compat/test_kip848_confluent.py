"""confluent-kafka (librdkafka) with `group.protocol=consumer` (KIP-848) against a real raftka
server: three members share a 6-partition topic, one leaves and another joins while records
keep coming; every record is consumed exactly once, and the commits end at the log ends.

Members commit synchronously after each batch and, for the partitions being revoked, in the
revoke callback (the partitions move only once the member stops reporting them as owned, so
the next owner starts exactly where this one stopped)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402

from tests.compat.server_process import ServerProcess, server_with_topics  # noqa: E402
from tests.compat.wire_client import WireConnection  # noqa: E402
from tests.support import wait_until  # noqa: E402

TOPIC = "kip848-orders"
GROUP = "kip848-members"
PARTITIONS = 6
TIMEOUT = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with server_with_topics(tmp_path, {TOPIC: PARTITIONS}, offsets_partitions=3) as process:
        yield process


class SteadyProducer:
    """Produces values 0, 1, 2, ... round-robin over the partitions, a few at a time with
    acks=all, until stopped: records keep arriving while members join and leave."""

    def __init__(self, bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
        # Idempotent: a retry across a leader change must not write a record twice.
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "enable.idempotence": True})
        self.topic, self.partitions = topic, partitions
        self.count = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for i in range(self.count, self.count + self.partitions):
                self.producer.produce(self.topic, str(i).encode(), partition=i % self.partitions)
            assert self.producer.flush(30) == 0
            self.count += self.partitions

    def stop(self) -> int:
        self._stop.set()
        self.thread.join(60)
        return self.count


def commits_reach_the_log_ends(bootstrap: str, group: str, topic: str, total: int,
                               partitions: int = PARTITIONS) -> None:
    """Wait until every partition's committed offset is its log end (`total` records spread
    evenly over `partitions`)."""
    with WireConnection(bootstrap) as conn:
        wait_until(lambda: [p.committed_offset for p in conn.fetch_offsets(
            group, topic, range(partitions)).topics[0].partitions] == [total // partitions] * partitions,
            TIMEOUT, what="commits at the log ends")


class Member:
    """A `group.protocol=consumer` member (or `protocol`'s) of `group` polling `topic` in its own
    thread; it commits after each batch and, synchronously, for the partitions it gives up."""

    def __init__(self, bootstrap: str, name: str, *, protocol: str = "consumer", group: str = GROUP,
                 topic: str = TOPIC, **config: str | int) -> None:
        self.name, self.protocol = name, protocol
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
        self.values: list[int] = []
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _assigned(self, consumer, partitions) -> None:
        with self._lock:
            self.assignment |= {p.partition for p in partitions}

    def _revoked(self, consumer, partitions) -> None:
        # Commit what was consumed from the partitions leaving, before they are released.
        try:
            consumer.commit(asynchronous=False)
        except Exception as exc:  # nothing consumed yet: "no offset to commit"
            self.errors.append(f"revoke commit: {exc}")
        with self._lock:
            self.assignment -= {p.partition for p in partitions}

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = self.consumer.consume(100, 0.1)
            good = [m for m in messages if m.error() is None]
            self.errors += [str(m.error()) for m in messages if m.error() is not None]
            with self._lock:
                self.values += [int(m.value()) for m in good]
            if good:
                try:
                    self.consumer.commit(asynchronous=False)
                except Exception as exc:
                    self.errors.append(f"commit: {exc}")

    def owned(self) -> set[int]:
        with self._lock:
            return set(self.assignment)

    def close(self) -> None:
        """Stop polling, then leave the group (close revokes, so the callback commits)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(30)
        self.consumer.close()


def consumed(members: list[Member]) -> list[int]:
    return sorted(v for m in members for v in m.values)


def test_members_join_and_leave_every_record_exactly_once(server: ServerProcess) -> None:
    bootstrap = server.bootstrap
    producer = SteadyProducer(bootstrap)
    members = [Member(bootstrap, f"member-{n}") for n in "abc"]
    everyone = list(members)
    try:
        # The uniform assignor: 2 partitions each, once the group has settled.
        wait_until(lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2], TIMEOUT,
                   what="2 partitions per member")
        wait_until(lambda: all(m.values for m in members), TIMEOUT, what="every member consuming")
        leaving = members.pop()
        leaving.close()
        wait_until(lambda: sorted(len(m.owned()) for m in members) == [3, 3], TIMEOUT,
                   what="the leaver's partitions reassigned")
        joining = Member(bootstrap, "member-d")
        members.append(joining)
        everyone.append(joining)
        wait_until(lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2], TIMEOUT,
                   what="the newcomer got its share")
        wait_until(lambda: joining.values, TIMEOUT, what="the newcomer consuming")
        total = producer.stop()
        wait_until(lambda: len(consumed(everyone)) >= total, TIMEOUT, what=f"{total} records consumed")
        assert consumed(everyone) == list(range(total)), "a record was lost or consumed twice"
        commits_reach_the_log_ends(bootstrap, GROUP, TOPIC, total)
    finally:
        producer.stop()
        for member in members:
            member.close()
    # Tolerated: nothing to commit yet when revoked; a commit sent with the epoch the member
    # was just moved past (STALE_MEMBER_EPOCH, Kafka's rule; its next commit covers it).
    tolerated = ("_NO_OFFSET", "STALE_MEMBER_EPOCH")
    assert not [e for m in everyone for e in m.errors if not any(t in e for t in tolerated)], [
        m.errors for m in everyone]


def test_an_empty_classic_group_is_taken_over_with_its_offsets(server: ServerProcess) -> None:
    """A classic (JoinGroup) consumer commits half the records and leaves; a
    `group.protocol=consumer` member takes the empty group over and goes on from its
    offsets (Kafka allows the upgrade of an empty classic group)."""
    bootstrap = server.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(120):
        producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "classic",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen: list[int] = []
    try:
        classic.subscribe([TOPIC])

        def half_consumed() -> bool:
            for m in classic.consume(100, 0.2):
                if m.error() is None and len(seen) < 60:
                    seen.append(int(m.value()))
                    classic.commit(message=m, asynchronous=False)
            return len(seen) >= 60

        wait_until(half_consumed, TIMEOUT, what="the classic consumer's 60 records")
    finally:
        classic.close()
    member = Member(bootstrap, "upgraded")
    try:
        wait_until(lambda: len(member.values) >= 120 - len(seen), TIMEOUT, what="the rest consumed")
        assert sorted(seen + member.values) == list(range(120)), "the takeover lost or repeated records"
    finally:
        member.close()
    with WireConnection(bootstrap) as conn:
        group = conn.request(69, 1, {"group_ids": [GROUP], "include_authorized_operations": False}).groups[0]
        assert (group.error_code, group.group_state) == (0, "Empty")


def describe(bootstrap: str):
    """ConsumerGroupDescribe at the group's coordinator."""
    with WireConnection(bootstrap.split(",")[0]) as conn:
        found = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(conn.find_coordinator(GROUP)),
                           TIMEOUT, what="the group's coordinator")
    with WireConnection(f"{found.host}:{found.port}") as conn:
        return conn.request(69, 1, {"group_ids": [GROUP], "include_authorized_operations": False}).groups[0]


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(server: ServerProcess) -> None:
    """`group.instance.id`: closing sends epoch -2 (the member keeps its place and
    partitions for a session); the restarted consumer takes them back, the group epoch
    unchanged, while the other member keeps its own."""
    bootstrap = server.bootstrap
    static = Member(bootstrap, "static-1", **{"group.instance.id": "instance-1"})
    other = Member(bootstrap, "dynamic-1")
    members = [static, other]
    try:
        wait_until(lambda: sorted(len(m.owned()) for m in members) == [3, 3], TIMEOUT, what="3 partitions each")
        before = describe(bootstrap)
        mine, theirs = static.owned(), other.owned()
        static.close()
        members.remove(static)
        left = describe(bootstrap)
        assert left.group_epoch == before.group_epoch
        assert -2 in {m.member_epoch for m in left.members}, left
        restarted = Member(bootstrap, "static-2", **{"group.instance.id": "instance-1"})
        members.append(restarted)
        wait_until(lambda: restarted.owned() == mine, TIMEOUT, what="the static member's partitions back")
        after = describe(bootstrap)
        assert after.group_epoch == before.group_epoch, "a static member's restart bumped the group epoch"
        assert other.owned() == theirs
        assert [m.instance_id for m in after.members].count("instance-1") == 1
    finally:
        for member in members:
            member.close()


def test_exactly_once_across_a_kill_of_the_group_coordinator(tmp_path: Path) -> None:
    """Three members in a 3-node cluster under a steady producer; the broker that coordinates
    the group (and leads some of the topic's partitions) is killed with SIGKILL. The group
    moves with its `__consumer_offsets` partition, the members go on at their epochs, and
    every record is consumed exactly once, with the commits at the log ends."""
    from tests.integration.cluster_support import bootstrap_of, create_topic, running_cluster

    extra = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
             "min.insync.replicas": "2"}
    with running_cluster(tmp_path, 3, extra) as cluster:
        create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=3)
        bootstrap = bootstrap_of(cluster)
        producer = SteadyProducer(bootstrap)
        members = [Member(bootstrap, f"member-{n}") for n in "abc"]
        try:
            wait_until(lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2], TIMEOUT,
                       what="2 partitions per member")
            wait_until(lambda: all(m.values for m in members), TIMEOUT, what="every member consuming")
            with WireConnection(bootstrap.split(",")[0]) as conn:
                coordinator = conn.find_coordinator(GROUP).node_id
            epochs = {m.member_id: m.member_epoch for m in describe(bootstrap).members}
            cluster.kill(coordinator)
            survivors = bootstrap_of(cluster, {coordinator})
            seen = len(consumed(members))
            wait_until(lambda: len(consumed(members)) > seen + 60, TIMEOUT, what="consuming after the kill")
            total = producer.stop()
            wait_until(lambda: len(consumed(members)) >= total, TIMEOUT, what=f"{total} records consumed")
            assert consumed(members) == list(range(total)), "a record was lost or consumed twice"
            after = wait_until(lambda: (lambda g: g if g.error_code == 0 else None)(describe(survivors)), TIMEOUT,
                               what="the group at its new coordinator")
            assert {m.member_id: m.member_epoch for m in after.members} == epochs, "members were fenced"
            with WireConnection(survivors.split(",")[0]) as conn:
                def committed() -> list[int] | None:
                    found = conn.find_coordinator(GROUP)
                    if found.error_code:
                        return None
                    with WireConnection(f"{found.host}:{found.port}") as coordinator_conn:
                        fetched = coordinator_conn.fetch_offsets(GROUP, TOPIC, range(PARTITIONS))
                    return [p.committed_offset for p in fetched.topics[0].partitions] if not fetched.error_code else None

                wait_until(lambda: committed() == [total // PARTITIONS] * PARTITIONS, TIMEOUT,
                           what="commits at the log ends")
        finally:
            producer.stop()
            for member in members:
                member.close()
