"""Share groups (KIP-932) on the wire against a real `raftka server start` process:
ShareGroupHeartbeat (76) and ShareGroupDescribe (77) served and advertised, assignments
spread over the members, leave, session expiry, the group's records in `__consumer_offsets`
(Kafka's ShareGroup* records, the share-state initialization among them) surviving a restart
of its coordinator, share groups in ListGroups, the group id refused to other group types,
and DeleteGroups."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftka.broker.group.group_records import ShareGroupKey, decode_key
from raftka.broker.group.share_group_records import STATE_PARTITION_METADATA, decode_record
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS
from tests.compat.server_process import ServerProcess, running_server, server_with_topics
from tests.compat.wire_client import WireConnection
from tests.support import wait_until

TOPIC = "jobs"
GROUP = "queue"
TIMEOUT = 30.0
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with server_with_topics(tmp_path, {TOPIC: 4}) as process:
        yield process


def heartbeat(conn: WireConnection, member: str, epoch: int, *, topics=None, group: str = GROUP):
    return conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": topics})


def join(conn: WireConnection, member: str, group: str = GROUP):
    box = {}
    wait_until(lambda: conn.find_coordinator(group).error_code == 0, TIMEOUT, what="a coordinator")

    def answered() -> bool:
        box["r"] = heartbeat(conn, member, 0, topics=[TOPIC], group=group)
        return box["r"].error_code not in RETRIABLE

    wait_until(answered, TIMEOUT, what=f"{member} joined {group}")
    assert box["r"].error_code == 0, box["r"]
    return box["r"]


def assigned(response) -> set[int]:
    assert response.error_code == 0 and response.assignment is not None, response
    return {p for t in response.assignment.topic_partitions for p in t.partitions}


def describe(conn: WireConnection, group: str = GROUP):
    return conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                         "include_authorized_operations": False}).groups[0]


def loaded_describe(conn: WireConnection, group: str = GROUP):
    def answered():
        described = describe(conn, group)
        return described if described.error_code not in RETRIABLE else None
    return wait_until(answered, TIMEOUT, what=f"{group} described")


def initialized_in_log(conn: WireConnection) -> set[int]:
    """The partitions of TOPIC the group's last ShareGroupStatePartitionMetadata record names initialized."""
    topic_id = next(t.topic_id for t in conn.request(ApiKey.METADATA, 12, {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": TOPIC}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}).topics)
    last = None
    for batch in conn.read_all("__consumer_offsets", 0):
        for record in batch.records:
            key = decode_key(record.key) if record.key else None
            if isinstance(key, ShareGroupKey) and key.group_id == GROUP and key.kind == STATE_PARTITION_METADATA:
                last = decode_record(key.kind, None, record.value, {str(topic_id): TOPIC})
    assert last is not None and last.value is not None, "no ShareGroupStatePartitionMetadata record"
    return {p for t, p in last.value.initialized if t == TOPIC}


def test_share_group_membership_survives_a_restart_and_is_deleted(server: ServerProcess) -> None:
    with WireConnection(server.bootstrap) as conn:
        advertised = {k.api_key for k in conn.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert ApiKey.SHARE_GROUP_HEARTBEAT in advertised and ApiKey.SHARE_GROUP_HEARTBEAT in ADVERTISED_VERSIONS

        a = join(conn, "member-a")
        assert (a.member_epoch, a.heartbeat_interval_ms) == (2, 5000)  # a new group is at epoch 1
        assert assigned(a) == {0, 1, 2, 3}  # initialized before being assigned
        assert initialized_in_log(conn) == {0, 1, 2, 3}

        b = join(conn, "member-b")
        assert b.member_epoch == 3
        a = heartbeat(conn, "member-a", 2)
        assert a.member_epoch == 3
        spread_a, spread_b = assigned(a), assigned(b)
        assert spread_a | spread_b == {0, 1, 2, 3} and not spread_a & spread_b and len(spread_a) == 2

        group = describe(conn)
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch,
                group.assignor_name) == (0, "Stable", 3, 3, "simple")
        members = {m.member_id: m for m in group.members}
        assert {m: members[m].member_epoch for m in members} == {"member-a": 3, "member-b": 3}
        assert members["member-b"].subscribed_topic_names == [TOPIC]
        assert members["member-b"].assignment.topic_partitions[0].topic_name == TOPIC
        listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": ["stable"], "types_filter": ["share"]})
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
            (GROUP, "share", "share", "Stable")]

        # The id is a share group's: other group types are refused, as Kafka 4.4 does.
        refused = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": GROUP, "member_id": "c", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [TOPIC], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        assert (refused.error_code, refused.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                               f"Group {GROUP} is not a consumer group.")
        consumer = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": [GROUP], "include_authorized_operations": False}).groups[0]
        assert (consumer.error_code, consumer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                                 f"Group {GROUP} is not a consumer group.")
        classic = conn.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": [GROUP],
                                                           "include_authorized_operations": False}).groups[0]
        assert (classic.error_code, classic.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                               f"Group {GROUP} is not a classic group.")
        assert conn.commit_offsets("classic-group", TOPIC, {0: 1}) == {0: 0}
        other = heartbeat(conn, "x", 0, topics=[TOPIC], group="classic-group")
        assert (other.error_code, other.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group classic-group is not a share group.")
        unknown = heartbeat(conn, "x", 3, group="nobody")
        assert (unknown.error_code, unknown.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                               "Share group nobody not found.")

        left = heartbeat(conn, "member-b", -1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        a = heartbeat(conn, "member-a", 3)
        assert a.member_epoch == 4 and assigned(a) == {0, 1, 2, 3}

    server.stop()
    server.start()
    with WireConnection(server.bootstrap) as conn:
        group = loaded_describe(conn)
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (
            0, "Stable", 4, 4)
        assert {m.member_id: m.member_epoch for m in group.members} == {"member-a": 4}
        a = heartbeat(conn, "member-a", 4)
        assert (a.error_code, a.member_epoch) == (0, 4)

        deleted = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]}).results[0]
        assert deleted.error_code == ErrorCode.NON_EMPTY_GROUP
        assert heartbeat(conn, "member-a", -1).error_code == 0
        empty = describe(conn)  # the last leave moves the target assignment epoch too, as in Kafka 4.4
        assert (empty.group_state, empty.group_epoch, empty.assignment_epoch) == ("Empty", 5, 5)
        deleted = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]}).results[0]
        assert deleted.error_code == 0
        gone = describe(conn)
        assert (gone.error_code, gone.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, f"Group {GROUP} not found.")

    server.stop()
    server.start()
    with WireConnection(server.bootstrap) as conn:
        gone = loaded_describe(conn)
        assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND  # the tombstones were replayed


def test_a_silent_member_is_expired_after_its_session(tmp_path: Path) -> None:
    properties = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
                  "group.share.min.session.timeout.ms": "500", "group.share.session.timeout.ms": "5000",
                  "group.share.min.heartbeat.interval.ms": "100", "group.share.heartbeat.interval.ms": "200"}
    with running_server(tmp_path, properties=properties) as server, WireConnection(server.bootstrap) as conn:
        assert conn.create_topic(TOPIC, 2) == 0
        a = join(conn, "member-a")
        assert (a.member_epoch, a.heartbeat_interval_ms) == (2, 200)
        b = join(conn, "member-b")
        assert b.member_epoch == 3

        epoch = {"b": b.member_epoch}

        def only_b_left():
            # b keeps its session alive; a says nothing and is expired by the coordinator. The
            # session (5 s) is 50 of b's heartbeats long, so a stalled machine cannot expire b too.
            answer = heartbeat(conn, "member-b", epoch["b"])
            assert answer.error_code == 0, answer
            epoch["b"] = answer.member_epoch
            return [m.member_id for m in describe(conn).members] == ["member-b"]

        wait_until(only_b_left, TIMEOUT, interval=0.1, what="member-a expired")
        group = describe(conn)
        assert (group.group_epoch, group.group_state) == (4, "Stable")
        b = heartbeat(conn, "member-b", epoch["b"])
        assert b.error_code == 0 and b.member_epoch == 4
        (member,) = describe(conn).members
        assert {p for t in member.assignment.topic_partitions for p in t.partitions} == {0, 1}
        assert [e.get("member") for e in server.logged("group.member_expired")] == ["member-a"]


def describe_offsets(conn: WireConnection, topics=None, *, version: int = 1, group: str = GROUP):
    return conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, {"groups": [{
        "group_id": group,
        "topics": None if topics is None else [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}]}
    ).groups[0]


def offsets_of(described) -> dict[tuple[str, int], tuple[int, int]]:
    assert described.error_code == 0, described
    return {(t.topic_name, p.partition_index): (p.start_offset, p.error_code)
            for t in described.topics for p in t.partitions}


def alter_offsets(conn: WireConnection, offsets: dict[str, dict[int, int]], group: str = GROUP):
    return conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in ps.items()]}
        for t, ps in offsets.items()]})


def test_share_group_offsets_are_described_altered_and_deleted(server: ServerProcess) -> None:
    unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    with WireConnection(server.bootstrap) as conn:
        join(conn, "member-a")
        assert offsets_of(describe_offsets(conn)) == {(TOPIC, p): (-1, 0) for p in range(4)}  # not read yet
        assert [p.lag for p in describe_offsets(conn).topics[0].partitions] == [-1] * 4

        busy = alter_offsets(conn, {TOPIC: {0: 5}})
        assert (busy.error_code, busy.error_message) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        busy = conn.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": GROUP, "topics": [{"topic_name": TOPIC}]})
        assert busy.error_code == ErrorCode.NON_EMPTY_GROUP

        assert heartbeat(conn, "member-a", -1).error_code == 0
        altered = alter_offsets(conn, {TOPIC: {0: 5, 1: 7}, "missing": {0: 1}})
        assert altered.error_code == 0
        assert {(t.topic_name, p.partition_index): p.error_code for t in altered.responses for p in t.partitions} == {
            (TOPIC, 0): 0, (TOPIC, 1): 0, ("missing", 0): unknown}
        assert offsets_of(describe_offsets(conn, {TOPIC: [0, 1, 2]}, version=0)) == {
            (TOPIC, 0): (5, 0), (TOPIC, 1): (7, 0), (TOPIC, 2): (-1, 0)}
        assert offsets_of(describe_offsets(conn, {"missing": [0]}))[("missing", 0)][1] == unknown
        assert describe(conn).group_epoch == 4  # 1, then join, leave, alter: a share partition's old state epoch is fenced

        deleted = conn.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": GROUP, "topics": [
            {"topic_name": TOPIC}, {"topic_name": "missing"}]})
        assert deleted.error_code == 0
        assert {t.topic_name: t.error_code for t in deleted.responses} == {TOPIC: 0, "missing": unknown}
        assert offsets_of(describe_offsets(conn)) == {}

        # An alter creates an empty share group; another type's id is refused.
        assert alter_offsets(conn, {TOPIC: {3: 1}}, group="fresh").error_code == 0
        listed = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert sorted((g.group_id, g.group_state) for g in listed.groups) == [("fresh", "Empty"), (GROUP, "Empty")]
        assert conn.commit_offsets("classic-group", TOPIC, {0: 1}) == {0: 0}
        other = describe_offsets(conn, group="classic-group")
        assert (other.error_code, other.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group classic-group is not a share group.")
        missing = describe_offsets(conn, group="nobody")
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
