"""Share groups (KIP-932) on the wire, where Kafka 4.4's details show: the subscribed topics'
metadata hash (KIP-1101) a share group keeps in its ShareGroupMetadata records.

The differential suite (tests/differential, scenario share-groups) runs `metadata_hash_records`
against Kafka 4.4 and raftka and compares the lines it returns.

- `metadata_hash_records`: a member joins a share group on a topic of 2 partitions and
  heartbeats until it is assigned both; the topic gets a third partition (CreatePartitions),
  and the member heartbeats until it is assigned all three; then it leaves. Printed: whether
  the member epoch moved after the partitions were added, and the metadata hashes of the
  group's ShareGroupMetadata records read back from `__consumer_offsets`, each as what it
  matches (`2 partitions`, `3 partitions`: raftka's broker/group/metadata_hash.py of the
  topic then; `0`), consecutive repeats once: Kafka initializes a partition's share state
  after answering and bumps the epoch again when it is done, raftka before (more records in
  Kafka, the same hashes in the same order).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.group_records import ShareGroupKey, decode_key
from raftka.broker.group.metadata_hash import subscription_hash
from raftka.broker.group.share_group_records import GROUP_METADATA, decode_record
from raftka.broker.group.share_group_state import GroupEpochRecord
from raftka.client.protocol import ApiKey
from tests.compat.kip848_cases import (
    OFFSETS_TOPIC,
    TIMEOUT,
    _name,
    _offsets_partition,
    _topic,
    retry_while_loading,
)
from tests.compat.wire_client import WireConnection


class _ShareMember:
    """One member speaking ShareGroupHeartbeat v1 (its own member id)."""

    def __init__(self, conn: WireConnection, group: str, topic: str, member_id: str) -> None:
        self.conn, self.group, self.topic, self.member_id = conn, group, topic, member_id
        self.epoch = 0
        self.partitions: list[int] = []
        self.deadline = time.monotonic() + TIMEOUT

    def heartbeat(self, epoch: int | None = None) -> Any:
        epoch = self.epoch if epoch is None else epoch
        body = {"group_id": self.group, "member_id": self.member_id, "member_epoch": epoch, "rack_id": None,
                "subscribed_topic_names": [self.topic] if epoch == 0 else None}
        response = retry_while_loading(lambda: self.conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body),
                                       self.deadline)
        if response.error_code:
            raise RuntimeError(f"share heartbeat of {self.member_id}: {_name(response.error_code)}")
        if epoch >= 0:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.partitions = sorted(p for t in response.assignment.topic_partitions for p in t.partitions)
        return response

    def until(self, done: Callable[[], bool]) -> None:
        """Heartbeat until `done()`: Kafka initializes the share state of new partitions after
        answering and assigns them at a later heartbeat."""
        while not done():
            if time.monotonic() > self.deadline:
                raise RuntimeError(f"{self.member_id}: epoch {self.epoch}, partitions {self.partitions}")
            time.sleep(0.2)  # polled: the coordinator assigns between heartbeats
            self.heartbeat()


def _add_partitions(conn: WireConnection, topic: str, count: int) -> None:
    answer = conn.request(ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": topic, "count": count, "assignments": None}], "timeout_ms": 30000,
        "validate_only": False})
    code = answer.results[0].error_code
    if code:
        raise RuntimeError(f"CreatePartitions {topic}: {_name(code)}")


def metadata_hash_records(bootstrap: str, group: str, topic: str, member_id: str) -> str:
    with WireConnection(bootstrap, timeout=30, client_id="dsh-client") as conn:
        meta = _topic(conn, topic)
        member = _ShareMember(conn, group, topic, member_id)
        # FindCoordinator first: on a fresh Kafka it creates __consumer_offsets.
        while conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code:
            if time.monotonic() > member.deadline:
                raise RuntimeError(f"no coordinator for {group}")
            time.sleep(0.2)  # polled under the member's deadline
        member.heartbeat()
        member.until(lambda: member.partitions == [0, 1])
        before = member.epoch
        _add_partitions(conn, topic, 3)
        while len(_topic(conn, topic).partitions) < 3:  # the new partition's leader is elected
            time.sleep(0.2)  # polled under the member's deadline
            if time.monotonic() > member.deadline:
                raise RuntimeError(f"{topic} has no third partition")
        member.until(lambda: member.partitions == [0, 1, 2])
        lines = [f"epoch moved after partitions were added: {member.epoch > before}"]
        member.heartbeat(epoch=-1)
        hashes = {subscription_hash([topic], {topic: TopicMeta(str(meta.topic_id), topic, n)}): f"{n} partitions"
                  for n in (2, 3)}
        seen: list[str] = []
        for batch in conn.read_all(OFFSETS_TOPIC, _offsets_partition(conn, group)):
            for record in batch.records:
                key = decode_key(record.key)
                if isinstance(key, ShareGroupKey) and key.group_id == group and key.kind == GROUP_METADATA:
                    value = decode_record(key.kind, None, record.value, {})
                    assert isinstance(value, GroupEpochRecord)
                    shown = "tombstone" if value.epoch is None else hashes.get(value.metadata_hash,
                                                                                 str(value.metadata_hash))
                    if not seen or seen[-1] != shown:
                        seen.append(shown)
        lines.append("ShareGroupMetadata hashes: " + ", ".join(seen))
        return "\n".join(lines)
