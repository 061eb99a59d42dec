"""KIP-848 consumer groups on the wire, where Kafka 4.4's details show: the records a group
leaves in `__consumer_offsets`, and a member's epoch while it revokes and the target moves.

Each function returns the lines it found; the differential suite (tests/differential,
scenario kip848-groups) runs it against Kafka 4.4 and raftka and compares them. Member ids are
the caller's; epochs are printed (both brokers start a group at epoch 1); wall-clock times and
hashes are printed as what they match (`now`, `computed`), not as numbers.

- `group_records`: a member joins, owns its assignment and leaves; the group's records, read
  back from `__consumer_offsets`, one line each. The group epoch record carries the metadata
  hash of the subscribed topics (KIP-1101, `computed`: raftka's broker/group/metadata_hash.py
  from the topic's id and partition count); no ConsumerGroupPartitionMetadata record (type 4)
  is written; the target assignment epoch follows the group epoch when the group empties.
- `revoke_while_target_moves`: a owns six partitions; b joins and a is asked to revoke three;
  c joins meanwhile; when a has revoked the three, it must revoke one more, at the epoch it
  had (Kafka's CurrentAssignmentBuilder), and reaches the group epoch when it has.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_MEMBER,
    TARGET_METADATA,
    decode_record,
)
from raftka.broker.group.group_records import ConsumerGroupKey, decode_key
from raftka.broker.group.metadata_hash import subscription_hash
from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection

TIMEOUT = 60.0
LOADING = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
           ErrorCode.NOT_COORDINATOR}
OFFSETS_TOPIC = "__consumer_offsets"
NAMES = {GROUP_METADATA: "GroupEpoch", PARTITION_METADATA: "PartitionMetadata", MEMBER_METADATA: "MemberMetadata",
         TARGET_METADATA: "TargetEpoch", TARGET_MEMBER: "Target", CURRENT_ASSIGNMENT: "Current",
         REGULAR_EXPRESSION: "Regex"}


def _name(code: int) -> str:
    return ErrorCode(code).name if code else "NONE"


def retry_while_loading(send: Callable[[], Any], deadline: float) -> Any:
    """`send()` again while the coordinator loads, until `deadline` (time.monotonic())."""
    while True:
        response = send()
        if response.error_code not in LOADING or time.monotonic() > deadline:
            return response
        time.sleep(0.2)  # polling the coordinator (a fresh broker's first group request) under the deadline


class _Member:
    """One consumer-protocol member speaking ConsumerGroupHeartbeat v1 (its own member id)."""

    def __init__(self, conn: WireConnection, group: str, topic: str, member_id: str) -> None:
        self.conn, self.group, self.topic, self.member_id = conn, group, topic, member_id
        self.epoch = 0
        self.owned: list[dict] = []
        self.deadline = time.monotonic() + TIMEOUT

    def heartbeat(self, epoch: int | None = None, owned: list[dict] | None = None) -> Any:
        epoch = self.epoch if epoch is None else epoch
        body = {"group_id": self.group, "member_id": self.member_id, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                "subscribed_topic_names": [self.topic] if epoch == 0 else None, "subscribed_topic_regex": None,
                "server_assignor": "uniform" if epoch == 0 else None,
                "topic_partitions": [] if epoch == 0 else (self.owned if owned is None else owned)}
        response = retry_while_loading(lambda: self.conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body),
                                       self.deadline)
        if response.error_code:
            raise RuntimeError(f"heartbeat of {self.member_id}: {_name(response.error_code)}")
        if epoch >= 0:
            self.epoch = response.member_epoch
        return response

    @property
    def partitions(self) -> list[int]:
        return sorted(p for t in self.owned for p in t["partitions"])

    def until(self, done: Callable[[Any], bool], owned: list[dict] | None = None) -> Any:
        """Heartbeat (reporting `owned`, else what it was last assigned) until `done(answer)`.
        Kafka 4.4 computes a new target up to group.consumer.assignment.interval.ms (1 s) after
        the last one; raftka at once: the answers differ in number, not in where they lead."""
        while True:
            answer = self.heartbeat(owned=owned)
            if answer.assignment is not None:
                self.owned = [{"topic_id": t.topic_id, "partitions": sorted(t.partitions)}
                              for t in answer.assignment.topic_partitions]
            if done(answer) or time.monotonic() > self.deadline:
                return answer
            time.sleep(0.1)  # polled: the coordinator computes the assignment between heartbeats


def _topic(conn: WireConnection, name: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        topic = conn.request(ApiKey.METADATA, 12, {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": name}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics[0]
        if (not topic.error_code and all(p.leader_id >= 0 for p in topic.partitions)) or time.monotonic() > deadline:
            return topic
        time.sleep(0.2)  # a topic just created gets its leaders, polled under the deadline


def _offsets_partition(conn: WireConnection, group: str) -> int:
    """Kafka's `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`."""
    units = group.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % len(_topic(conn, OFFSETS_TOPIC).partitions)


def _record_line(kind: int, member: str | None, value: bytes | None, expected_hash: int) -> str:
    name = NAMES[kind]
    if value is None:
        return f"{name}{f'({member})' if member else ''} tombstone"
    record = decode_record(kind, member, value)
    match kind:
        case 3:
            h = record.metadata_hash
            return f"GroupEpoch {record.epoch} hash={'computed' if h == expected_hash and h else h or 0}"
        case 6:
            stamp = record.timestamp_ms
            near = abs(stamp - time.time() * 1000) < 600_000
            return f"TargetEpoch {record.epoch} timestamp={'now' if stamp and near else stamp}"
        case 7:
            return f"Target({member}) {sorted(p for ps in record.partitions.values() for p in ps)}"
        case 8:
            a = record.assignment
            held = sorted(p for ps in a.assigned.values() for p in ps)
            return f"Current({member}) epoch={a.member_epoch} {a.state.name} {held}"
    return f"{name}{f'({member})' if member else ''}"


def group_records(bootstrap: str, group: str, topic: str, member_id: str) -> str:
    with WireConnection(bootstrap, timeout=30, client_id="dm-client") as conn:
        member = _Member(conn, group, topic, member_id)
        member.until(lambda a: a.assignment is None and bool(member.owned))
        member.heartbeat(epoch=-1)
        meta = _topic(conn, topic)
        topics = {topic: TopicMeta(str(meta.topic_id), topic, len(meta.partitions))}
        expected = subscription_hash([topic], topics)
        partition = _offsets_partition(conn, group)
        lines = []
        for batch in conn.read_all(OFFSETS_TOPIC, partition):
            for record in batch.records:
                key = decode_key(record.key)
                if isinstance(key, ConsumerGroupKey) and key.group_id == group:
                    lines.append(_record_line(key.kind, key.member_id, record.value, expected))
        return "\n".join(lines)


def revoke_while_target_moves(bootstrap: str, group: str, topic: str, ids: tuple[str, str, str]) -> str:
    with WireConnection(bootstrap, timeout=30, client_id="dm-client") as conn:
        a, b, c = (_Member(conn, group, topic, i) for i in ids)
        a.until(lambda answer: answer.assignment is None and len(a.partitions) == 6)
        held = a.owned
        out = [f"a owns {a.partitions} at epoch {a.epoch}"]
        b.heartbeat(epoch=0)
        a.until(lambda answer: len(a.partitions) < 6, owned=held)
        out.append(f"b joined: a is to keep {len(a.partitions)} at epoch {a.epoch}")
        kept = a.owned
        b.until(lambda answer: b.epoch > a.epoch)  # at the target's epoch, waiting for a's partitions
        c.heartbeat(epoch=0)
        c.until(lambda answer: c.epoch > b.epoch)
        out.append(f"c joined at epoch {c.epoch}")
        answer = a.heartbeat(owned=held)  # a still holds what it must give up: no change
        out.append(f"a still holding all: epoch {a.epoch}, assignment {'unchanged' if answer.assignment is None else 'sent'}")
        answer = a.heartbeat(owned=kept)  # a gave up what b gets; c's share comes from a's rest
        a_left = sorted(p for t in answer.assignment.topic_partitions for p in t.partitions) if answer.assignment else None
        out.append(f"a revoked {6 - len(kept[0]['partitions'])}: epoch {a.epoch}, "
                   f"to keep {len(a_left) if a_left is not None else 'the same'}")
        if a_left is not None:
            a.owned = [{"topic_id": kept[0]["topic_id"], "partitions": a_left}]
        a.until(lambda answer: a.epoch >= c.epoch)
        out.append(f"a revoked the rest: epoch {a.epoch}, owns {len(a.partitions)}")
        for m in (a, b, c):
            m.heartbeat(epoch=-1)
        return "\n".join(out)
