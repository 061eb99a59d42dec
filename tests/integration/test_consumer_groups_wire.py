"""KIP-848 on the wire against a real `raftka server start` process: ConsumerGroupHeartbeat
and ConsumerGroupDescribe, OffsetCommit with the member epoch, ListGroups' group type, the
group surviving a restart of its coordinator (Kafka's ConsumerGroup* records in
`__consumer_offsets`), and the protocol hand-overs Kafka allows (an empty classic group
taken over by a consumer member, and the reverse); a non-empty group is refused."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.server_process import ServerProcess, server_with_topics
from tests.compat.wire_client import WireConnection
from tests.integration.sdk_broker import RAFTKA, raftka_env
from tests.support import wait_until

TOPIC = "orders"
GROUP = "kip848"
TIMEOUT = 30.0
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with server_with_topics(tmp_path, {TOPIC: 4}) as process:
        yield process


def heartbeat(conn: WireConnection, member: str, epoch: int, *, topics=None, owned=None, rebalance=-1,
              group: str = GROUP, version: int = 1, regex: str | None = None):
    return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": rebalance, "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
        "server_assignor": None,
        "topic_partitions": None if owned is None else [{"topic_id": t, "partitions": sorted(ps)}
                                                         for t, ps in owned.items()]})


def join(conn: WireConnection, member: str, group: str = GROUP):
    """Join with epoch 0, retrying while the coordinator gets ready."""
    box = {}
    wait_until(lambda: conn.find_coordinator(group).error_code == 0, TIMEOUT, what="a coordinator")

    def answered() -> bool:
        box["r"] = heartbeat(conn, member, 0, topics=[TOPIC], owned={}, rebalance=30000, group=group)
        return box["r"].error_code not in RETRIABLE

    wait_until(answered, TIMEOUT, what=f"{member} joined {group}")
    assert box["r"].error_code == 0, box["r"]
    return box["r"]


def partitions(response) -> dict[uuid.UUID, set[int]]:
    assert response.assignment is not None, response
    return {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions}


def describe(conn: WireConnection, group: str = GROUP):
    return conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                            "include_authorized_operations": False}).groups[0]


def commit(conn: WireConnection, member: str, epoch: int, offsets: dict[int, int], group: str = GROUP,
           topic: str = TOPIC, version: int = 9):
    # v9: what consumer-protocol members must commit with (v8 and older: UNSUPPORTED_VERSION).
    response = conn.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": None} for p, o in offsets.items()]}]})
    return {p.partition_index: p.error_code for p in response.topics[0].partitions}


def test_heartbeat_reconciles_commits_and_survives_a_restart(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        versions = {k.api_key: (k.min_version, k.max_version)
                    for k in conn.request(ApiKey.API_VERSIONS, 0, {}).api_keys}
        assert versions[68] == (0, 1) and versions[69] == (0, 1)

        a = join(conn, "member-a")
        assert (a.member_epoch, a.heartbeat_interval_ms) == (2, 5000)
        (topic_id, owned_a), = partitions(a).items()
        assert owned_a == {0, 1, 2, 3}

        b = join(conn, "member-b")  # b waits for a to release its share
        assert b.member_epoch == 3 and partitions(b) == {}

        a = heartbeat(conn, "member-a", 2)
        assert a.error_code == 0 and a.member_epoch == 2  # revoke first, at the old epoch
        kept = partitions(a)[topic_id]
        assert len(kept) == 2
        a = heartbeat(conn, "member-a", 2, owned={topic_id: kept})
        assert (a.error_code, a.member_epoch) == (0, 3)
        b = heartbeat(conn, "member-b", 3)
        assert partitions(b) == {topic_id: {0, 1, 2, 3} - kept}

        assert set(commit(conn, "member-b", 3, {p: 7 for p in partitions(b)[topic_id]}).values()) == {0}
        assert set(commit(conn, "member-b", 2, {0: 9}).values()) == {ErrorCode.STALE_MEMBER_EPOCH}
        assert set(commit(conn, "nobody", 3, {0: 9}).values()) == {ErrorCode.UNKNOWN_MEMBER_ID}
        assert set(commit(conn, "member-b", 3, {0: 9}, version=8).values()) == {ErrorCode.UNSUPPORTED_VERSION}

        group = describe(conn)
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch,
                group.assignor_name) == (0, "Stable", 3, 3, "uniform")
        members = {m.member_id: m for m in group.members}
        assert {m.member_epoch for m in members.values()} == {3}
        assert {p for t in members["member-b"].assignment.topic_partitions for p in t.partitions} == (
            {0, 1, 2, 3} - kept)
        assert members["member-b"].assignment.topic_partitions[0].topic_name == TOPIC
        assert members["member-b"].member_type == 1
        listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [(GROUP, "consumer", "Stable")]

    # `raftka groups describe`: the epochs and, per member, kafka-consumer-groups' --members
    # --verbose columns (current and target assignments and epochs).
    ran = subprocess.run([*RAFTKA, "groups", "describe", "--group", GROUP, "--bootstrap-server", server.bootstrap],
                         capture_output=True, text=True, env=raftka_env(), timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["GROUP", GROUP, "STATE", "Stable", "PROTOCOL", "uniform", "MEMBERS", "2",
                                "GROUP-EPOCH", "3", "ASSIGNMENT-EPOCH", "3",
                                "COORDINATOR", server.bootstrap, "(1)"], ran.stdout
    member_b = next(line.split() for line in lines if line.startswith("member-b"))
    b_partitions = ",".join(map(str, sorted({0, 1, 2, 3} - kept)))
    assert member_b[3:] == ["2", "3", f"{TOPIC}:{b_partitions}", "3", f"{TOPIC}:{b_partitions}", TOPIC], ran.stdout

    server.stop()
    server.start()
    with WireConnection(server.bootstrap) as conn:
        def loaded():
            group = describe(conn)
            return group if group.error_code not in RETRIABLE else None

        group = wait_until(loaded, TIMEOUT, what="the group loaded after the restart")
        assert (group.error_code, group.group_epoch, group.assignment_epoch) == (0, 3, 3)
        assert {m.member_id: m.member_epoch for m in group.members} == {"member-a": 3, "member-b": 3}
        b = heartbeat(conn, "member-b", 3)
        assert (b.error_code, b.member_epoch) == (0, 3)
        # A stale epoch is still fenced after the restart.
        assert heartbeat(conn, "member-b", 6).error_code == ErrorCode.FENCED_MEMBER_EPOCH
        offsets = conn.fetch_offsets(GROUP, TOPIC, sorted(partitions_of(group, "member-b")))
        assert {p.committed_offset for p in offsets.topics[0].partitions} == {7}
        # Leaving: the group epoch moves on.
        assert heartbeat(conn, "member-a", -1).member_epoch == -1
        assert describe(conn).group_epoch == 4
        # OffsetDelete: a topic a member subscribes to keeps its offsets, another's go.
        assert conn.create_topic("other", 1) == 0
        wait_until(lambda: set(commit(conn, "member-b", 3, {0: 3}, topic="other").values()) == {0}, TIMEOUT,
                   what="a commit to another topic")
        deleted = conn.request(ApiKey.OFFSET_DELETE, 0, {"group_id": GROUP, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0}]},
            {"name": "other", "partitions": [{"partition_index": 0}]}]})
        assert deleted.error_code == 0
        assert {t.name: t.partitions[0].error_code for t in deleted.topics} == {
            TOPIC: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "other": 0}
        assert conn.fetch_offsets(GROUP, "other", [0]).topics[0].partitions[0].committed_offset == -1
        # DeleteGroups: refused while a member is in, then the group and its offsets go.
        def delete() -> int:
            return conn.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": [GROUP]}).results[0].error_code

        assert delete() == ErrorCode.NON_EMPTY_GROUP
        assert heartbeat(conn, "member-b", -1).error_code == 0
        assert delete() == 0
        assert describe(conn).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert {p.committed_offset for p in conn.fetch_offsets(GROUP, TOPIC, [0, 1, 2, 3]).topics[0].partitions} == {-1}

    server.stop()
    server.start()
    with WireConnection(server.bootstrap) as conn:  # still deleted after a restart
        def answered():
            group = describe(conn)
            return group if group.error_code not in RETRIABLE else None

        assert wait_until(answered, TIMEOUT, what="an answer").error_code == ErrorCode.GROUP_ID_NOT_FOUND


def partitions_of(group, member: str) -> set[int]:
    m = next(m for m in group.members if m.member_id == member)
    return {p for t in m.assignment.topic_partitions for p in t.partitions}


def test_protocol_takeovers(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        wait_until(lambda: conn.find_coordinator("classic-then-new").error_code == 0, TIMEOUT, what="coordinator")
        # An empty classic group (offsets only) is taken over by a consumer member; its offsets stay.
        wait_until(lambda: set(conn.commit_offsets("classic-then-new", TOPIC, {0: 5}).values()) == {0},
                   TIMEOUT, what="a classic commit")
        joined = join(conn, "new-member", group="classic-then-new")
        assert joined.member_epoch == 2
        fetched = conn.fetch_offsets("classic-then-new", TOPIC, [0])
        assert fetched.topics[0].partitions[0].committed_offset == 5
        # A classic JoinGroup into that (non-empty) consumer group joins it as a classic member
        # (tests/compat/test_kip848_migration.py); one of another protocol type is refused.
        refused = conn.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": "classic-then-new", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "connect",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # Once empty, a classic member may take it back, with the offsets.
        assert heartbeat(conn, "new-member", -1, group="classic-then-new").error_code == 0
        rejoined = conn.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": "classic-then-new", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert rejoined.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert conn.fetch_offsets("classic-then-new", TOPIC, [0]).topics[0].partitions[0].committed_offset == 5
        # v0: the coordinator names a member that joins without an id.
        named = heartbeat(conn, "", 0, topics=[TOPIC], owned={}, rebalance=30000, group="v0-group", version=0)
        assert named.error_code == 0 and len(named.member_id) == 22
        # v1: the member must name itself.
        unnamed = heartbeat(conn, "", 0, topics=[TOPIC], owned={}, rebalance=30000, group="v1-group")
        assert unnamed.error_code == ErrorCode.INVALID_REQUEST


def test_a_member_that_does_not_revoke_in_time_is_fenced_by_the_timer(server: ServerProcess) -> None:
    """The rebalance timeout (the member's own, from the moment it is asked to revoke) fires
    in the coordinator's timer: the member is removed, its records written, and the
    partitions it held go to the member that waited for them."""
    with WireConnection(server.bootstrap) as conn:
        wait_until(lambda: conn.find_coordinator("slow").error_code == 0, TIMEOUT, what="a coordinator")

        def joined(member: str, rebalance: int):
            box = {}

            def answered() -> bool:
                box["r"] = heartbeat(conn, member, 0, topics=[TOPIC], owned={}, rebalance=rebalance, group="slow")
                return box["r"].error_code not in RETRIABLE

            wait_until(answered, TIMEOUT, what=f"{member} joined")
            return box["r"]

        slow = joined("slow-member", 1500)
        (topic_id, everything), = partitions(slow).items()
        joined("waiting-member", 30000)
        asked = heartbeat(conn, "slow-member", 2, group="slow")
        assert asked.member_epoch == 2 and len(partitions(asked)[topic_id]) == 2  # asked to revoke two
        # It keeps reporting all four as owned: no progress; the timer removes it.
        still = heartbeat(conn, "slow-member", 2, owned={topic_id: everything}, group="slow")
        assert (still.error_code, still.member_epoch) == (0, 2)

        def fenced() -> bool:
            return heartbeat(conn, "slow-member", 2, owned={topic_id: everything},
                             group="slow").error_code == ErrorCode.UNKNOWN_MEMBER_ID

        wait_until(fenced, TIMEOUT, what="the slow member fenced")
        waiting = heartbeat(conn, "waiting-member", 3, group="slow")
        assert waiting.error_code == 0 and partitions(waiting) == {topic_id: everything}
        assert describe(conn, "slow").group_epoch == 4


def test_the_group_moves_with_its_coordinator(tmp_path: Path) -> None:
    """kill -9 of the coordinator in a 3-node cluster: the new leader of the group's
    `__consumer_offsets` partition loads the replicated records and serves the group at the
    same epochs; its members go on heartbeating without rejoining. A member subscribed by regex
    keeps its partitions: the group's resolution of the regex (a ConsumerGroupRegularExpression
    record, read back here from the log) is loaded with the rest, so nothing is reassigned."""
    from raftka.broker.group.consumer_group_records import REGULAR_EXPRESSION, decode_record
    from raftka.broker.group.group_records import ConsumerGroupKey, decode_key
    from tests.integration.cluster_support import bootstrap_of, create_topic, running_cluster

    extra = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3"}
    with running_cluster(tmp_path, 3, extra) as cluster:
        create_topic(cluster, TOPIC, partitions=4, rf=3)
        create_topic(cluster, "orders-eu", partitions=2, rf=3)

        def coordinator(exclude: set[int] = frozenset()) -> tuple[int, str]:
            with WireConnection(bootstrap_of(cluster, exclude).split(",")[0]) as conn:
                found = wait_until(lambda: (lambda r: r if r.error_code == 0 and r.node_id not in exclude else None)(
                    conn.find_coordinator(GROUP)), TIMEOUT, what="a coordinator")
                return found.node_id, f"{found.host}:{found.port}"

        node, address = coordinator()
        with WireConnection(address) as conn:
            a = join(conn, "member-a")
            (topic_id, _), = partitions(a).items()
            join(conn, "member-b")
            kept = partitions(heartbeat(conn, "member-a", 2))[topic_id]
            assert heartbeat(conn, "member-a", 2, owned={topic_id: kept}).member_epoch == 3
            assert partitions(heartbeat(conn, "member-b", 3)) == {topic_id: {0, 1, 2, 3} - kept}
            # A regex new to the group: admitted at epoch 3 with nothing, then resolved (epoch 4).
            r = heartbeat(conn, "member-r", 0, topics=[], regex="orders-.*", owned={}, rebalance=30000)
            assert (r.error_code, r.member_epoch, partitions(r)) == (0, 3, {})
            r = heartbeat(conn, "member-r", 3, owned={})
            assert r.member_epoch == 4 and [len(ps) for ps in partitions(r).values()] == [2]
            for member in ("member-a", "member-b"):
                assert heartbeat(conn, member, 3).member_epoch == 4
            before = describe(conn)
            assert (before.group_state, before.group_epoch) == ("Stable", 4)
        cluster.kill(node)
        new_node, new_address = coordinator(exclude={node})
        assert new_node != node
        with WireConnection(new_address) as conn:
            def served():
                group = describe(conn)
                return group if group.error_code not in RETRIABLE else None

            after = wait_until(served, TIMEOUT, what="the group at its new coordinator")
            assert (after.error_code, after.group_state, after.group_epoch, after.assignment_epoch) == (
                0, "Stable", before.group_epoch, before.assignment_epoch)
            assert {m.member_id: (m.member_epoch, partitions_of(after, m.member_id)) for m in after.members} == {
                m.member_id: (m.member_epoch, partitions_of(before, m.member_id)) for m in before.members}
            for member in ("member-a", "member-b", "member-r"):
                answer = heartbeat(conn, member, 4)
                assert (answer.error_code, answer.member_epoch) == (0, 4), member
            again = describe(conn)
            assert (again.group_epoch, again.assignment_epoch) == (4, 4)
            assert partitions_of(again, "member-r") == partitions_of(before, "member-r") == {0, 1}
            # The resolution as the new coordinator's log holds it.
            resolutions = [decode_record(key.kind, key.member_id, record.value)
                           for batch in conn.read_all("__consumer_offsets", 0) for record in batch.records
                           if isinstance(key := decode_key(record.key), ConsumerGroupKey)
                           and key.kind == REGULAR_EXPRESSION and key.group_id == GROUP]
            assert resolutions and resolutions[0].regex == "orders-.*"
            assert {r.resolution.topics for r in resolutions if r.resolution} == {frozenset({"orders-eu"})}


def test_acls_on_the_group_and_the_subscribed_topics(tmp_path: Path) -> None:
    """Kafka's rules for ConsumerGroupHeartbeat: READ on the group, DESCRIBE on each topic
    subscribed to; ConsumerGroupDescribe: DESCRIBE on the group. A regex only matches the
    topics the member may DESCRIBE."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Resource

    from raftka.raft_meta.security.authorizer import STANDARD_AUTHORIZER

    process = ServerProcess(tmp_path, properties={
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
        "authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    try:
        process.start()
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 1) == 0 and conn.create_topic("secret", 1) == 0
            admin = AdminClient({"bootstrap.servers": process.bootstrap, "log_level": 0})
            [f.result(30) for f in admin.create_acls([
                AclBinding(Resource.TOPIC, "secret", Pattern.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.DESCRIBE, AclPermissionType.DENY),
                AclBinding(Resource.GROUP, "closed", Pattern.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.ALL, AclPermissionType.DENY)]).values()]
            join(conn, "member-a")  # an allowed subscription works

            def refused(group: str, topics: list[str]) -> int:
                return heartbeat(conn, "member-x", 0, topics=topics, owned={}, rebalance=30000,
                                 group=group).error_code

            wait_until(lambda: refused(GROUP, [TOPIC, "secret"]) == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       TIMEOUT, what="the denied topic refused")
            assert refused("closed", [TOPIC]) == ErrorCode.GROUP_AUTHORIZATION_FAILED
            assert describe(conn, "closed").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            assert {m.member_id for m in describe(conn).members} == {"member-a"}

            joined = heartbeat(conn, "member-r", 0, topics=[], regex="orders|secret", owned={}, rebalance=30000,
                               group="regex-acl")
            assert joined.error_code == 0, joined
            # The resolution follows that heartbeat; the next one computes the target.
            assert heartbeat(conn, "member-r", joined.member_epoch, group="regex-acl").error_code == 0
            [member] = describe(conn, "regex-acl").members
            assert member.subscribed_topic_regex == "orders|secret"
            assert [t.topic_name for t in member.target_assignment.topic_partitions] == [TOPIC]
    finally:
        process.stop()


def test_the_group_consumer_configs_reach_the_coordinator(tmp_path: Path) -> None:
    # group.consumer.heartbeat.interval.ms and group.consumer.assignors from server.properties.
    process = ServerProcess(tmp_path, properties={"offsets.topic.num.partitions": "1",
                                                  "offsets.topic.replication.factor": "1",
                                                  "group.consumer.heartbeat.interval.ms": "2500",
                                                  "group.consumer.assignors": "range"})
    try:
        process.start()
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 4) == 0
            a = join(conn, "member-a")
            assert a.heartbeat_interval_ms == 2500
            b = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": GROUP, "member_id": "member-c", "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [TOPIC],
                "subscribed_topic_regex": None, "server_assignor": "uniform", "topic_partitions": []})
            assert b.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR, b  # only range is configured
    finally:
        process.stop()
