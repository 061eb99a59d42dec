"""The group membership state machine, driven by requests and ticks with explicit clocks."""

from __future__ import annotations

import itertools

import pytest

from raftka.broker.group.group_records import (
    GroupKey,
    GroupMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    java_string_hash,
    offset_key,
    offset_value,
    partition_for_group,
)
from raftka.broker.group.group_state import (
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    CommittedOffset,
    GroupPhase,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)

SESSION = 10_000
REBALANCE = 30_000


def make_group(delay_ms: int = 0) -> GroupState:
    counter = itertools.count(1)
    return GroupState("g", initial_rebalance_delay_ms=delay_ms,
                      new_member_id=lambda client: f"{client}-{next(counter)}")


def join(group, member_id="", now=0, protocols=(("range", b"r"), ("roundrobin", b"rr")), client="c",
         known=False, ptype="consumer"):
    return group.join(member_id, client_id=client, client_host="/127.0.0.1", session_timeout_ms=SESSION,
                      rebalance_timeout_ms=REBALANCE, protocol_type=ptype, protocols=protocols, now_ms=now,
                      require_known_member_id=known)


def replies_for(replies, kind):
    return {r.member_id: r.result for r in replies if r.kind == kind}


def stable_group_of_two() -> tuple[GroupState, str, str]:
    group = make_group()
    a, replies = join(group, now=0)
    assert replies_for(replies, "join")[a].error_code == NONE  # alone: completes at once
    b, replies = join(group, now=1)
    assert replies == [] and group.phase is GroupPhase.PREPARING_REBALANCE
    a2, replies = join(group, a, now=2)
    joined = replies_for(replies, "join")
    assert set(joined) == {a, b} and a2 == a
    assert group.generation_id == 2 and group.leader_id == a
    replies = group.sync(b, 2, {}, now_ms=3)
    assert replies == []  # waits for the leader
    replies = group.sync(a, 2, {a: b"A", b: b"B"}, now_ms=4)
    synced = replies_for(replies, "sync")
    assert synced == {a: SyncResult(NONE, b"A", "consumer", "range"), b: SyncResult(NONE, b"B", "consumer", "range")}
    assert group.phase is GroupPhase.STABLE
    return group, a, b


def test_first_member_leads_and_gets_every_members_metadata():
    group = make_group()
    a, replies = join(group)
    (result,) = replies
    assert result.kind == "join" and result.member_id == a
    assert result.result.leader == a and result.result.generation_id == 1
    assert result.result.protocol_name == "range"
    assert [m.member_id for m in result.result.members] == [a]
    assert group.phase is GroupPhase.COMPLETING_REBALANCE


def test_v4_join_without_member_id_gets_member_id_required_then_joins():
    group = make_group()
    member_id, replies = join(group, known=True)
    assert replies_for(replies, "join")[member_id] == JoinResult(MEMBER_ID_REQUIRED, member_id)
    assert group.members == {}
    same, replies = join(group, member_id, known=True)
    assert same == member_id and replies_for(replies, "join")[member_id].error_code == NONE


def test_unknown_member_id_is_refused():
    group = make_group()
    _, replies = join(group, "nobody")
    assert replies_for(replies, "join")["nobody"].error_code == UNKNOWN_MEMBER_ID


def test_rebalance_waits_for_every_known_member_then_followers_get_no_member_list():
    group, a, b = stable_group_of_two()
    c, replies = join(group, now=10)
    assert replies == [] and group.phase is GroupPhase.PREPARING_REBALANCE
    assert group.heartbeat(a, 2, 11) == REBALANCE_IN_PROGRESS
    _, replies = join(group, a, now=12)
    assert replies == []
    _, replies = join(group, b, now=13)
    joined = replies_for(replies, "join")
    assert set(joined) == {a, b, c}
    assert len(joined[a].members) == 3 and joined[b].members == () and joined[c].members == ()
    assert group.generation_id == 3


def test_heartbeat_errors():
    group, a, b = stable_group_of_two()
    assert group.heartbeat(a, 2, 5) == NONE
    assert group.heartbeat(a, 1, 5) == ILLEGAL_GENERATION
    assert group.heartbeat("ghost", 2, 5) == UNKNOWN_MEMBER_ID


def test_leave_triggers_rebalance_and_remaining_member_completes_it():
    group, a, b = stable_group_of_two()
    code, replies = group.leave(b, 20)
    assert code == NONE and group.phase is GroupPhase.PREPARING_REBALANCE
    _, replies = join(group, a, now=21)
    assert replies_for(replies, "join")[a].generation_id == 3
    assert group.leave("ghost", 22)[0] == UNKNOWN_MEMBER_ID


def test_session_expiry_removes_silent_member():
    group, a, b = stable_group_of_two()
    group.heartbeat(a, 2, SESSION)  # a keeps heartbeating, b goes silent after t=4
    replies, removed = group.tick(4 + SESSION)
    assert removed == [b] and group.phase is GroupPhase.PREPARING_REBALANCE
    _, replies = join(group, a, now=4 + SESSION + 1)
    assert replies_for(replies, "join")[a].members[0].member_id == a


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    group, a, b = stable_group_of_two()
    _, replies = join(group, a, now=100)  # the leader rejoins: a rebalance starts
    assert replies == []
    group.heartbeat(b, 2, 100 + SESSION - 1)  # b heartbeats (gets REBALANCE_IN_PROGRESS) but never rejoins
    replies, removed = group.tick(100 + SESSION)
    assert removed == []
    group.heartbeat(b, 2, 100 + 2 * SESSION - 2)
    replies, removed = group.tick(100 + REBALANCE)
    assert removed == [b] and replies_for(replies, "join")[a].generation_id == 3


def test_sync_errors_and_rebalance_during_completing_answers_parked_syncs():
    group = make_group()
    a, _ = join(group)
    b, _ = join(group, now=1)
    join(group, a, now=2)
    gen = group.generation_id
    assert replies_for(group.sync(a, gen - 1, {}, 3), "sync")[a].error_code == ILLEGAL_GENERATION
    assert replies_for(group.sync("x", gen, {}, 3), "sync")["x"].error_code == UNKNOWN_MEMBER_ID
    assert group.sync(b, gen, {}, 3) == []
    c, replies = join(group, now=4)  # a newcomer before the leader synced
    assert replies_for(replies, "sync") == {b: SyncResult(REBALANCE_IN_PROGRESS)}


def test_leader_that_never_syncs_is_removed_at_the_sync_deadline():
    group = make_group()
    a, _ = join(group)
    b, _ = join(group, now=1)
    join(group, a, now=2)
    group.sync(b, group.generation_id, {}, 3)
    group.heartbeat(b, group.generation_id, REBALANCE)
    replies, removed = group.tick(2 + REBALANCE)
    assert removed == [a]
    assert replies_for(replies, "sync") == {b: SyncResult(REBALANCE_IN_PROGRESS)}


def test_inconsistent_protocols_are_refused():
    group = make_group()
    join(group)
    _, replies = join(group, protocols=(("sticky", b""),), now=1)
    assert next(iter(replies)).result.error_code == INCONSISTENT_GROUP_PROTOCOL
    _, replies = join(group, ptype="connect", now=1)
    assert next(iter(replies)).result.error_code == INCONSISTENT_GROUP_PROTOCOL


def test_protocol_selection_is_by_vote():
    group = make_group()
    a, _ = join(group, protocols=(("roundrobin", b""), ("range", b"")))
    b, _ = join(group, protocols=(("roundrobin", b""), ("range", b"")), now=1)
    c, _ = join(group, protocols=(("range", b""), ("roundrobin", b"")), now=1)
    join(group, a, protocols=(("roundrobin", b""), ("range", b"")), now=2)
    _, replies = join(group, b, protocols=(("roundrobin", b""), ("range", b"")), now=2)
    assert group.protocol_name == "roundrobin"


def test_initial_rebalance_delay_lets_more_members_into_the_first_generation():
    group = make_group(delay_ms=3000)
    a, replies = join(group, now=0)
    assert replies == []
    b, replies = join(group, now=1000)
    assert replies == []
    replies, _ = group.tick(3500)
    assert replies == []  # the delay was extended by the second join
    replies, _ = group.tick(4000)
    assert set(replies_for(replies, "join")) == {a, b} and group.generation_id == 1


def test_commit_validation():
    group, a, b = stable_group_of_two()
    assert group.validate_commit(a, 2, 5) == NONE
    assert group.validate_commit(a, 1, 5) == ILLEGAL_GENERATION
    assert group.validate_commit("ghost", 2, 5) == UNKNOWN_MEMBER_ID
    assert group.validate_commit("", -1, 5) == ILLEGAL_GENERATION  # members exist
    join(group, now=6)
    assert group.validate_commit(a, 2, 7) == NONE  # commits in on_revoke, before rejoining
    empty = make_group()
    assert empty.validate_commit("", -1, 0) == NONE


def test_everyone_leaving_empties_the_group():
    group, a, b = stable_group_of_two()
    group.leave(a, 10)
    group.leave(b, 11)
    assert group.phase is GroupPhase.EMPTY and group.members == {}


def test_restore_installs_a_stable_group():
    group = make_group()
    member = Member("m1", "c", "/h", SESSION, REBALANCE, "consumer", (("range", b"meta"),), None, b"asg")
    group.restore(protocol_type="consumer", generation_id=7, protocol_name="range", leader_id="m1",
                  members=[member], now_ms=1000)
    assert group.phase is GroupPhase.STABLE and group.heartbeat("m1", 7, 1001) == NONE
    assert replies_for(group.sync("m1", 7, {}, 1002), "sync")["m1"] == SyncResult(NONE, b"asg", "consumer", "range")


@pytest.mark.parametrize(("ptype", "pname", "expected"), [
    (None, None, NONE), ("consumer", "range", NONE),            # v0-4 send neither; v5 the group's
    ("connect", None, INCONSISTENT_GROUP_PROTOCOL), (None, "roundrobin", INCONSISTENT_GROUP_PROTOCOL),
])
def test_sync_v5_checks_the_protocol_type_and_name(ptype, pname, expected):
    """SyncGroup v5 (KIP-559): a type or name other than the group's is refused; a success
    names the group's."""
    group, a, _ = stable_group_of_two()
    result = replies_for(group.sync(a, 2, {}, 5, protocol_type=ptype, protocol_name=pname), "sync")[a]
    assert result.error_code == expected
    named = ("consumer", "range") if expected == NONE else (None, None)
    assert (result.protocol_type, result.protocol_name) == named


# --- __consumer_offsets records -------------------------------------------------------

def test_offset_records_round_trip_in_kafkas_layout():
    key = offset_key("grp", "topic", 3)
    assert key == b"\x00\x01\x00\x03grp\x00\x05topic\x00\x00\x00\x03"
    assert decode_key(key) == OffsetKey("grp", "topic", 3)
    committed = CommittedOffset(42, 5, "meta", 1234)
    assert decode_offset_value(offset_value(committed)) == committed
    assert decode_key(group_key("grp")) == GroupKey("grp")


def test_group_metadata_round_trips():
    member = Member("m1", "cid", "/1.2.3.4", SESSION, REBALANCE, "consumer", (("range", b"sub"),), "inst",
                    b"asg")
    meta = GroupMetadata("consumer", 4, "range", "m1", 99, (member,))
    back = decode_group_value(group_value(meta))
    assert (back.generation_id, back.protocol_name, back.leader_id) == (4, "range", "m1")
    (m,) = back.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.assignment, m.metadata_for("range")) == (
        "m1", "inst", "cid", b"asg", b"sub")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x09abc", b"\x00\x01\x00\x10short"])
def test_malformed_keys_raise_value_error(data):
    with pytest.raises(ValueError):
        decode_key(data)


def test_group_partition_matches_java_hashcode():
    # Java: "abc".hashCode() == 96354, "".hashCode() == 0, "polygenelubricants".hashCode() == MIN_VALUE
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("abc", 50) == 96354 % 50
    assert java_string_hash("héllo") == 103094734
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # hashed as a UTF-16 surrogate pair
