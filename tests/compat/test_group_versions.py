"""The classic group APIs at Kafka 4.4's newest versions, on a real broker: JoinGroup v9
(protocol type KIP-559, reason KIP-800, SkipAssignment KIP-814), SyncGroup v5 (protocol type
and name checked and answered), Heartbeat v4 and LeaveGroup v5 (flexible, a reason)."""

from __future__ import annotations

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.test_kafka44_apis import _coordinator_ready
from tests.compat.wire_client import WireConnection

METADATA = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def _join(conn: WireConnection, group: str, version: int, member_id: str = "",
          instance: str | None = None):
    return conn.request(ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": METADATA}], "reason": "testing"}, timeout=30.0)


def _sync(conn: WireConnection, group: str, joined, *, protocol_name: str = "range",
          assignment: bytes = b"\x00\x01"):
    return conn.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": protocol_name,
        "assignments": [{"member_id": joined.member_id, "assignment": assignment}]}, timeout=30.0)


def test_a_dynamic_member_through_the_newest_versions(bootstrap: str) -> None:
    group = "gv-dynamic"
    _coordinator_ready(bootstrap, group)
    with WireConnection(bootstrap) as conn:
        required = _join(conn, group, 9)
        assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED
        # v7+: an error names no protocol (null, not ""), and no type.
        assert (required.protocol_type, required.protocol_name) == (None, None)
        joined = _join(conn, group, 9, required.member_id)
        assert joined.error_code == 0
        assert (joined.protocol_type, joined.protocol_name, joined.leader) == ("consumer", "range", joined.member_id)
        assert joined.skip_assignment is False
        wrong = _sync(conn, group, joined, protocol_name="roundrobin")
        assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (wrong.protocol_type, wrong.protocol_name) == (None, None)
        synced = _sync(conn, group, joined)
        assert (synced.error_code, synced.protocol_type, synced.protocol_name, bytes(synced.assignment)) == (
            0, "consumer", "range", b"\x00\x01")
        beat = conn.request(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": joined.generation_id,
                                                  "member_id": joined.member_id, "group_instance_id": None})
        assert beat.error_code == 0
        left = conn.request(ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [
            {"member_id": joined.member_id, "group_instance_id": None, "reason": "done"}]})
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [(joined.member_id, 0)]


def test_a_restarted_static_leader_skips_the_assignment_from_v9(bootstrap: str) -> None:
    """KIP-814, as Kafka's GroupMetadataManager: from v9 the static leader that rejoins a Stable
    group with a new member id is its leader, gets the members, and is told to skip the
    assignment; before v9 it gets no members and the previous leader's id."""
    for version in (8, 9):
        group = f"gv-static-{version}"
        _coordinator_ready(bootstrap, group)
        with WireConnection(bootstrap) as conn:
            first = _join(conn, group, version, instance="leader-1")
            assert first.error_code == 0
            assert _sync(conn, group, first).error_code == 0
            again = _join(conn, group, version, instance="leader-1")
        assert again.error_code == 0
        assert again.member_id != first.member_id
        assert again.generation_id == first.generation_id
        if version >= 9:
            assert (again.leader, again.skip_assignment) == (again.member_id, True)
            assert [m.member_id for m in again.members] == [again.member_id]
        else:
            assert (again.leader, again.skip_assignment, again.members) == (first.member_id, False, [])


def test_find_coordinator_batched_from_v4(bootstrap: str) -> None:
    """KIP-699: v4+ answer each key as v3 answers one, without the message (Kafka's KafkaApis)."""
    group = "gv-find"
    _coordinator_ready(bootstrap, group)
    with WireConnection(bootstrap) as conn:
        single = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        assert single.error_code == 0
        for version in (4, 5):
            batch = conn.request(ApiKey.FIND_COORDINATOR, version,
                                 {"key_type": 0, "coordinator_keys": [group, ""]})
            found, empty = batch.coordinators
            assert (found.key, found.error_code, found.node_id, found.host, found.port, found.error_message) == (
                group, 0, single.node_id, single.host, single.port, None)
            assert (empty.key, empty.error_code, empty.node_id, empty.host, empty.port) == (
                "", ErrorCode.INVALID_REQUEST, -1, "", -1)
