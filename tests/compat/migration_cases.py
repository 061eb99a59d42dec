"""KIP-848's online upgrade and downgrade over the wire, as each kind of member sees it: one
classic member (JoinGroup/SyncGroup/Heartbeat v9/v5/v4, the eager `range` protocol, session
45 s) forms a classic group; a consumer-protocol member (ConsumerGroupHeartbeat v1) joins it
and upgrades it; the classic member is asked to rejoin, rejoins and gets its share; the
consumer-protocol member leaves and the group is a classic group again, rebalancing.

`walk` prints what each answer said (error names, generations and epochs, partitions, the
group's type and state), the same lines for raftka and for Kafka 4.4: tests/differential
runs it against both, tests/compat/test_kip848_migration.py holds raftka to KAFKA_44."""

from __future__ import annotations

import time

from raftka.client.group_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.records import TopicPartition
from tests.compat.wire_client import WireConnection

LOADING = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def _name(code: int) -> str:
    return ErrorCode(code).name


def _retry(call, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while True:
        answer = call()
        if getattr(answer, "error_code", 0) not in LOADING or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)  # the coordinator is loading; polled under the deadline


def _join(conn: WireConnection, group: str, subscription: bytes, member_id: str):
    """A classic JoinGroup v9 (range, session 45 s), retried while the coordinator loads."""
    return _retry(lambda: conn.request(ApiKey.JOIN_GROUP, 9, {
        "group_id": group, "session_timeout_ms": 45000, "rebalance_timeout_ms": 30000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription}], "reason": None}))


def walk(bootstrap: str, group: str, topic: str, consumer_member: str) -> str:
    lines: list[str] = []
    with WireConnection(bootstrap, timeout=30, client_id="dg-client") as conn:
        _retry(lambda: conn.find_coordinator(group))
        subscription = encode_subscription(Subscription((topic,)), 1)

        def join(member_id: str):
            return _join(conn, group, subscription, member_id)

        def sync(member_id: str, generation: int, assignments: list[dict]):
            answer = conn.request(ApiKey.SYNC_GROUP, 5, {
                "group_id": group, "generation_id": generation, "member_id": member_id,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                "assignments": assignments})
            partitions = sorted(tp.partition for tp in decode_assignment(bytes(answer.assignment)).partitions)
            return f"{_name(answer.error_code)} partitions={partitions}"

        def heartbeat(member_id: str, generation: int) -> str:
            return _name(conn.request(ApiKey.HEARTBEAT, 4, {
                "group_id": group, "generation_id": generation, "member_id": member_id,
                "group_instance_id": None}).error_code)

        def consumer_heartbeat(epoch: int, owned: list[dict] | None):
            return conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                "group_id": group, "member_id": consumer_member, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                "subscribed_topic_names": [topic] if epoch == 0 else None, "subscribed_topic_regex": None,
                "server_assignor": "uniform" if epoch == 0 else None, "topic_partitions": owned})

        def listed() -> str:
            groups = conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups
            found = [(g.group_type, g.group_state) for g in groups if g.group_id == group]
            return " ".join(f"type={t} state={s}" for t, s in found) or "not listed"

        def commit(member_id: str, generation: int, partition: int = 0) -> str:
            answer = conn.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "committed_offset": 0, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]})
            return _name(answer.topics[0].partitions[0].error_code)

        # The classic group: MEMBER_ID_REQUIRED, then the member leads generation 1 alone.
        required = join("")
        classic = required.member_id
        first = join(classic)
        lines.append(f"classic join: {_name(required.error_code)}, then {_name(first.error_code)} "
                     f"generation={first.generation_id} protocol={first.protocol_name} "
                     f"leader={'self' if first.leader == classic else repr(first.leader)} members={len(first.members)}")
        everything = encode_assignment(Assignment((TopicPartition(topic, 0), TopicPartition(topic, 1))))
        lines.append(f"classic sync: {sync(classic, first.generation_id, [{'member_id': classic, 'assignment': everything}])}")
        lines.append(f"group: {listed()}")

        # The upgrade: a consumer-protocol member joins the classic group.
        answer = consumer_heartbeat(0, [])
        epoch = answer.member_epoch
        lines.append(f"consumer join: {_name(answer.error_code)} epoch={epoch} "
                     f"assignment={_partitions(answer.assignment)}")
        lines.append(f"group: {listed()}")
        lines.append(f"classic heartbeat generation {first.generation_id}: {heartbeat(classic, first.generation_id)}")
        lines.append(f"classic commit generation {first.generation_id}: {commit(classic, first.generation_id)}")

        # The classic member (eager: it gave up everything) joins again: an immediate answer.
        again = join(classic)
        lines.append(f"classic rejoin: {_name(again.error_code)} generation={again.generation_id} "
                     f"protocol={again.protocol_name} leader={again.leader!r} members={len(again.members)}")
        lines.append(f"classic sync: {sync(classic, again.generation_id, [])}")
        lines.append(f"classic heartbeat generation {again.generation_id}: {heartbeat(classic, again.generation_id)}")
        lines.append(f"classic commit generation {again.generation_id}: {commit(classic, again.generation_id)}")
        lines.append(f"classic commit generation {again.generation_id + 1}: {commit(classic, again.generation_id + 1)}")
        # An older generation counts for the partition the member held since (its assignment
        # epoch), not for the one it gave up.
        lines.append(f"classic commit generation {first.generation_id}, partition 0: "
                     f"{commit(classic, first.generation_id)}")
        lines.append(f"classic commit generation {first.generation_id}, partition 1: "
                     f"{commit(classic, first.generation_id, 1)}")

        # The consumer-protocol member gets the partition the classic member released.
        owned: list[dict] = []
        for _ in range(20):
            answer = consumer_heartbeat(epoch, owned)
            if answer.error_code or answer.assignment is not None:
                break
            time.sleep(0.1)  # the assignment may come at a later heartbeat
        epoch = answer.member_epoch
        if answer.assignment is not None:
            owned = [{"topic_id": t.topic_id, "partitions": sorted(t.partitions)}
                     for t in answer.assignment.topic_partitions]
        lines.append(f"consumer heartbeat: {_name(answer.error_code)} epoch={epoch} "
                     f"assignment={_partitions(answer.assignment)}")
        described = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]
        lines.append(f"described: {_name(described.error_code)} state={described.group_state} "
                     f"epoch={described.group_epoch} members=" + " ".join(sorted(
                         f"{'classic' if m.member_type == 0 else 'consumer'}@{m.member_epoch}"
                         f":{sorted(p for t in m.assignment.topic_partitions for p in t.partitions)}"
                         for m in described.members)))
        lines.append(f"group: {listed()}")
        for version in (5, 6):
            old = conn.request(ApiKey.DESCRIBE_GROUPS, version, {
                "groups": [group], "include_authorized_operations": False}).groups[0]
            lines.append(f"describe groups v{version}: {_name(old.error_code)} {old.error_message or ''} "
                         f"state={old.group_state} members={len(old.members)}")

        # The downgrade: the last consumer-protocol member leaves.
        left = consumer_heartbeat(-1, None)
        lines.append(f"consumer leave: {_name(left.error_code)} epoch={left.member_epoch}")
        lines.append(f"group: {listed()}")
        lines.append(f"classic heartbeat generation {again.generation_id}: {heartbeat(classic, again.generation_id)}")
        last = join(classic)
        lines.append(f"classic rejoin: {_name(last.error_code)} generation={last.generation_id} "
                     f"protocol={last.protocol_name} leader={'self' if last.leader == classic else repr(last.leader)} "
                     f"members={len(last.members)}")
        lines.append(f"classic sync: {sync(classic, last.generation_id, [{'member_id': classic, 'assignment': everything}])}")
        lines.append(f"group: {listed()}")
        conn.request(ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [
            {"member_id": classic, "group_instance_id": None, "reason": None}]})
    return "\n".join(lines)


def mixed(bootstrap: str, group: str, topic: str, consumer_member: str) -> str:
    """A mixed group left in place for the tools to describe: a classic member (session 45 s)
    upgraded by a consumer-protocol member, both at the group epoch with their partitions."""
    with WireConnection(bootstrap, timeout=30, client_id="dg-client") as conn:
        _retry(lambda: conn.find_coordinator(group))
        subscription = encode_subscription(Subscription((topic,)), 1)

        def join(member_id: str):
            return _join(conn, group, subscription, member_id)

        def sync(member_id: str, generation: int, assignments: list[dict]) -> int:
            return conn.request(ApiKey.SYNC_GROUP, 5, {
                "group_id": group, "generation_id": generation, "member_id": member_id,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                "assignments": assignments}).error_code

        classic = join("").member_id
        first = join(classic)
        everything = encode_assignment(Assignment((TopicPartition(topic, 0), TopicPartition(topic, 1))))
        codes = [first.error_code, sync(classic, first.generation_id, [{"member_id": classic, "assignment": everything}])]
        body = {"group_id": group, "member_id": consumer_member, "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                "subscribed_topic_regex": None, "server_assignor": "uniform", "topic_partitions": []}
        answer = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        epoch = answer.member_epoch
        again = join(classic)
        codes += [answer.error_code, again.error_code, sync(classic, again.generation_id, [])]
        for _ in range(20):
            answer = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
                **body, "member_epoch": epoch, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                "server_assignor": None, "topic_partitions": None})
            if answer.error_code or answer.assignment is not None:
                break
            time.sleep(0.1)  # the assignment may come at a later heartbeat
        codes.append(answer.error_code)
    return "joined: " + " ".join(_name(c) for c in codes)


def _partitions(assignment) -> str:
    if assignment is None:
        return "unchanged"
    return str(sorted(p for t in assignment.topic_partitions for p in t.partitions))


# What Kafka 4.4 answered (tests/differential runs `walk` against it again).
KAFKA_44 = """\
classic join: MEMBER_ID_REQUIRED, then NONE generation=1 protocol=range leader=self members=1
classic sync: NONE partitions=[0, 1]
group: type=classic state=Stable
consumer join: NONE epoch=2 assignment=[]
group: type=consumer state=Reconciling
classic heartbeat generation 1: REBALANCE_IN_PROGRESS
classic commit generation 1: NONE
classic rejoin: NONE generation=2 protocol=range leader='' members=0
classic sync: NONE partitions=[0]
classic heartbeat generation 2: NONE
classic commit generation 2: NONE
classic commit generation 3: ILLEGAL_GENERATION
classic commit generation 1, partition 0: NONE
classic commit generation 1, partition 1: ILLEGAL_GENERATION
consumer heartbeat: NONE epoch=2 assignment=[1]
described: NONE state=Stable epoch=2 members=classic@2:[0] consumer@2:[1]
group: type=consumer state=Stable
describe groups v5: NONE  state=Dead members=0
describe groups v6: GROUP_ID_NOT_FOUND Group dg-group is not a classic group. state=Dead members=0
consumer leave: NONE epoch=-1
group: type=classic state=PreparingRebalance
classic heartbeat generation 2: REBALANCE_IN_PROGRESS
classic rejoin: NONE generation=3 protocol=range leader=self members=1
classic sync: NONE partitions=[0, 1]
group: type=classic state=Stable"""
