"""KIP-848's online upgrade and downgrade of a consumer group, with confluent-kafka (librdkafka)
against a real raftka server, under a produce load.

Three classic members (confluent-kafka with `group.protocol=classic` and kafka-python, the
eager `range` assignor) share a 6-partition topic. They are rolled one at a time to `group.protocol=consumer`: the first
consumer-protocol member upgrades the classic group online (its classic members stay, keeping
their partitions, and rejoin through REBALANCE_IN_PROGRESS), the last classic member leaves a
consumer group. Then they are rolled back: the last consumer-protocol member to leave
converts the group back into a classic group. Every record is consumed exactly once (each
member commits after each batch and in its revoke callback) and the commits end at the log
ends. ConsumerGroupDescribe shows each member's type (0 classic, 1 consumer) meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from raftka.client.protocol import ErrorCode  # noqa: E402
from raftka.client.protocol.api_keys import ApiKey  # noqa: E402
from tests.compat.migration_cases import KAFKA_44, mixed, walk  # noqa: E402
from tests.compat.server_process import ServerProcess, running_server, server_with_topics  # noqa: E402
from tests.compat.test_kip848_confluent import Member as ConfluentMember  # noqa: E402
from tests.compat.test_kip848_confluent import SteadyProducer, commits_reach_the_log_ends  # noqa: E402
from tests.compat.wire_client import WireConnection  # noqa: E402
from tests.support import wait_until  # noqa: E402

TOPIC = "migration-orders"
GROUP = "migration-members"
PARTITIONS = 6
TIMEOUT = 60.0
CLASSIC, CONSUMER = "classic", "consumer"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    # Consumer-protocol members heartbeat every 500 ms (Kafka's default 5 s), as the classic
    # ones here: the rolls settle sooner.
    with running_server(tmp_path, properties={"offsets.topic.num.partitions": "1",
                                              "offsets.topic.replication.factor": "1",
                                              "group.consumer.heartbeat.interval.ms": "500"}) as process:
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, PARTITIONS) == 0
        yield process


class Member(ConfluentMember):
    """A confluent-kafka member of either protocol (test_kip848_confluent's, on this group)."""

    def __init__(self, bootstrap: str, name: str, protocol: str) -> None:
        classic = {"partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                   "heartbeat.interval.ms": 500} if protocol == CLASSIC else {}
        super().__init__(bootstrap, name, protocol=protocol, group=GROUP, topic=TOPIC, **classic)


class KafkaPythonMember:
    """A kafka-python (classic protocol, eager `range`) member, as `Member`."""

    def __init__(self, bootstrap: str, name: str) -> None:
        import kafka

        self.name, self.protocol = name, CLASSIC
        self.values: list[int] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=GROUP, client_id=name, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
        # No revoke callback: kafka-python runs it on its IO thread, where a commit cannot
        # block. Each batch is committed before the next poll, which is where it rebalances.
        self.consumer.subscribe([TOPIC])
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _commit(self) -> None:
        try:
            self.consumer.commit()
        except Exception as exc:
            self.errors.append(f"commit: {exc!r}")

    def _run(self) -> None:
        while not self._stop.is_set():
            batches = self.consumer.poll(100)
            with self._lock:
                self.values += [int(r.value) for records in batches.values() for r in records]
            if batches:
                self._commit()

    def owned(self) -> set[int]:
        # Read from the poll thread's state: kafka-python keeps its assignment in the
        # subscription state, which `assignment()` copies.
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(30)
        self.consumer.close()  # commits nothing more (no auto-commit) and leaves the group


def listed(bootstrap: str) -> tuple[str, str]:
    """The group's (type, state) in ListGroups."""
    with WireConnection(bootstrap) as conn:
        groups = conn.request(16, 5, {"states_filter": [], "types_filter": []}).groups
    return next(((g.group_type, g.group_state) for g in groups if g.group_id == GROUP), ("", ""))


def group_view(bootstrap: str) -> tuple[str, dict[str, int]]:
    """(the group's type in ListGroups, {client id: member type} from ConsumerGroupDescribe;
    empty for a classic group)."""
    kind, _ = listed(bootstrap)
    with WireConnection(bootstrap) as conn:
        described = conn.request(69, 1, {"group_ids": [GROUP], "include_authorized_operations": False}).groups[0]
    return kind, {m.client_id: m.member_type for m in described.members} if described.error_code == 0 else {}


def settled(members: list[Member]) -> bool:
    """Every partition owned by exactly one member, everyone consuming something."""
    owned = [p for m in members for p in m.owned()]
    return sorted(owned) == list(range(PARTITIONS)) and all(m.owned() for m in members)


def test_a_group_is_upgraded_and_downgraded_online_one_member_at_a_time(server: ServerProcess) -> None:
    bootstrap = server.bootstrap
    producer = SteadyProducer(bootstrap, TOPIC, PARTITIONS)
    # c is a kafka-python consumer whenever it is a classic one.
    members: dict[str, Member | KafkaPythonMember] = {n: Member(bootstrap, f"{n}-{CLASSIC}", CLASSIC) for n in "ab"}
    members["c"] = KafkaPythonMember(bootstrap, f"c-{CLASSIC}")
    everyone = list(members.values())
    views: list[tuple[str, dict[str, int]]] = []
    marks: list[tuple[str, int]] = []

    def roll(name: str, protocol: str) -> None:
        consumed_before = sum(len(m.values) for m in everyone)
        members[name].close()
        marks.append((f"{name}->{protocol}", producer.count))
        members[name] = (KafkaPythonMember(bootstrap, f"{name}-{protocol}") if (name, protocol) == ("c", CLASSIC)
                         else Member(bootstrap, f"{name}-{protocol}", protocol))
        everyone.append(members[name])
        group = list(members.values())
        wait_until(lambda: settled(group), TIMEOUT, what=f"the group settled after {name} moved to {protocol}")
        # As a rolling restart does: the next member moves once the group is Stable (every
        # member at the group epoch; a classic member behind it would see its commits refused
        # with ILLEGAL_GENERATION once the group is downgraded, in Kafka too).
        wait_until(lambda: listed(bootstrap)[1] == "Stable", TIMEOUT, what="the group Stable")
        wait_until(lambda: members[name].values and sum(len(m.values) for m in everyone) > consumed_before + 30,
                   TIMEOUT, what=f"{name}-{protocol} consuming")
        views.append(group_view(bootstrap))

    try:
        wait_until(lambda: settled(list(members.values())), TIMEOUT, what="the classic group settled")
        views.append(group_view(bootstrap))
        for name in "abc":
            roll(name, CONSUMER)
        for name in "abc":
            roll(name, CLASSIC)
        total = producer.stop()
        wait_until(lambda: {v for m in everyone for v in m.values} >= set(range(total)), TIMEOUT,
                   what=f"{total} records consumed")
        seen: dict[int, list[str]] = {}
        for m in everyone:
            for v in m.values:
                seen.setdefault(v, []).append(f"{m.name}#{everyone.index(m)}")
        twice = {v: names for v, names in seen.items() if len(names) > 1}
        lost = sorted(set(range(total)) - set(seen))
        assert not twice and not lost, (f"consumed twice: {sorted(twice.items())[:12]} ({len(twice)}), "
                                        f"lost: {lost[:12]} ({len(lost)}); marks {marks}; errors {[(m.name, m.errors[:6]) for m in everyone]}")
        commits_reach_the_log_ends(bootstrap, GROUP, TOPIC, total, PARTITIONS)
    finally:
        producer.stop()
        for member in members.values():
            member.close()
    consumer_type, classic_type = 1, 0
    assert views == [
        ("classic", {}),
        # a upgraded the group; b and c are its classic members.
        ("consumer", {"a-consumer": consumer_type, "b-classic": classic_type, "c-classic": classic_type}),
        ("consumer", {"a-consumer": consumer_type, "b-consumer": consumer_type, "c-classic": classic_type}),
        ("consumer", {"a-consumer": consumer_type, "b-consumer": consumer_type, "c-consumer": consumer_type}),
        # A classic member joins the consumer group.
        ("consumer", {"a-classic": classic_type, "b-consumer": consumer_type, "c-consumer": consumer_type}),
        ("consumer", {"a-classic": classic_type, "b-classic": classic_type, "c-consumer": consumer_type}),
        # c-consumer was the last consumer-protocol member: a classic group again.
        ("classic", {}),
    ], views
    # Tolerated: nothing to commit when revoked; a consumer-protocol commit with the epoch the
    # member was just moved past (its next commit covers it).
    tolerated = ("_NO_OFFSET", "STALE_MEMBER_EPOCH")
    assert not [e for m in everyone for e in m.errors if not any(t in e for t in tolerated)], [
        (m.name, m.errors) for m in everyone]


def test_each_member_sees_what_it_sees_on_kafka(tmp_path: Path) -> None:
    """The wire-level walk through an upgrade and a downgrade (tests/compat/migration_cases.py)
    answers what Kafka 4.4 answered."""
    with server_with_topics(tmp_path, {"dg-t": 2}) as process:
        assert walk(process.bootstrap, "dg-group", "dg-t", "dg-member-0000000000000") == KAFKA_44


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_a_policy_without_upgrade_refuses_it_as_kafka_does(tmp_path: Path, policy: str) -> None:
    """group.consumer.migration.policy: a consumer-protocol member joining a live classic group
    gets GROUP_ID_NOT_FOUND with Kafka's message; the classic member goes on undisturbed."""
    with running_server(tmp_path, properties={"offsets.topic.num.partitions": "1",
                                              "offsets.topic.replication.factor": "1",
                                              "group.consumer.migration.policy": policy}) as process:
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, PARTITIONS) == 0
        classic = Member(process.bootstrap, "classic", CLASSIC)
        try:
            wait_until(lambda: classic.owned() == set(range(PARTITIONS)), TIMEOUT, what="the classic member settled")
            with WireConnection(process.bootstrap) as conn:
                answer = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                    "group_id": GROUP, "member_id": "refused-member-00000000", "member_epoch": 0,
                    "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                    "subscribed_topic_names": [TOPIC], "subscribed_topic_regex": None, "server_assignor": None,
                    "topic_partitions": []})
            assert (answer.error_code, answer.error_message) == (
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {GROUP} to consumer group because online upgrade is disabled.")
            assert listed(process.bootstrap) == ("classic", "Stable")
            assert classic.owned() == set(range(PARTITIONS))
        finally:
            classic.close()


def test_a_mixed_group_survives_a_coordinator_restart(tmp_path: Path) -> None:
    """The classic members' metadata is stored (ClassicMemberMetadata in Kafka's
    ConsumerGroupMemberMetadataValue): after a restart the loaded group still knows which
    member is which, at the same epochs, and answers the classic member's Heartbeat."""
    with server_with_topics(tmp_path, {"dg-t": 2}) as process:
        assert mixed(process.bootstrap, "dg-mixed", "dg-t", "dg-mixed-member-0000000") == (
            "joined: " + " ".join(["NONE"] * 6))

        def members() -> dict[int, tuple[str, int]] | None:
            with WireConnection(process.bootstrap) as conn:
                group = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
                    "group_ids": ["dg-mixed"], "include_authorized_operations": False}).groups[0]
            if group.error_code:
                return None
            return {m.member_type: (m.member_id, m.member_epoch) for m in group.members}

        before = members()
        assert before is not None and set(before) == {0, 1}
        process.stop()
        process.start()
        assert wait_until(members, TIMEOUT, what="the group loaded after the restart") == before
        classic_id, epoch = before[0]
        with WireConnection(process.bootstrap) as conn:
            answer = conn.request(ApiKey.HEARTBEAT, 4, {"group_id": "dg-mixed", "generation_id": epoch,
                                                        "member_id": classic_id, "group_instance_id": None})
        assert answer.error_code == ErrorCode.NONE
