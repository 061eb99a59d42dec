"""Committed offsets and empty groups expire as on Kafka (offsets.retention.minutes), with a
real node and librdkafka members.

offsets.retention.minutes=1 is Kafka's smallest; the check runs every 500 ms. Four groups:

- `emptied`: a member subscribes, commits and leaves; a minute after it emptied, its offsets
  are tombstoned and the group is deleted (ListGroups no longer shows it, DescribeGroups
  answers GROUP_ID_NOT_FOUND);
- `standalone`: commits outside any generation (an `assign()` consumer); they expire a
  minute after the commit, and the group goes with them;
- `idle`: a member joins and leaves without committing (what `console-consumer-*` groups
  are): deleted at the next check;
- `modern`: a KIP-848 consumer group whose member commits and leaves: its offset expires a
  minute after the commit, and the group goes (ConsumerGroupDescribe: GROUP_ID_NOT_FOUND);
- `active`: a member stays subscribed to TOPIC for the whole minute; that offset stays,
  while the one it committed for OTHER, a topic it does not subscribe to, expires (KIP-496).

Then the node restarts: the tombstones replay (the expired stay gone), and `active`, whose
member left just before, keeps its offset (its retention counts from when it emptied, a
timestamp its metadata record carries, not from its minute-old commit).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from raftka.broker.group.group_records import GroupKey, OffsetKey, decode_key
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from tests.compat.server_process import ServerProcess
from tests.compat.wire_client import WireConnection
from tests.integration import test_consumer_groups_wire as kip848
from tests.integration.groups_support import consumer_config
from tests.support import wait_until

TOPIC, OTHER = "kept", "unsubscribed"
RETENTION_S = 60.0
NOT_READY = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path, properties={
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
        "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "500",
        "group.min.session.timeout.ms": "1000"})
    try:
        process.start()
        with WireConnection(process.bootstrap) as conn:
            assert conn.create_topic(TOPIC, 1) == 0
            assert conn.create_topic(OTHER, 1) == 0
            assert conn.create_topic(kip848.TOPIC, 1) == 0
            wait_until(lambda: conn.find_coordinator("any").error_code == 0, timeout=30.0,
                       what="a group coordinator (it creates __consumer_offsets)")
        yield process
    finally:
        process.stop()


def committed(conn: WireConnection, group: str, topic: str = TOPIC) -> int | None:
    """The group's committed offset of `topic`-0 (-1: none), None while the coordinator loads."""
    response = conn.fetch_offsets(group, topic, [0])
    if response.error_code in NOT_READY:
        return None
    assert response.error_code == 0, response
    return response.topics[0].partitions[0].committed_offset


def listed(conn: WireConnection) -> dict[str, str]:
    """ListGroups v4: group id -> state."""
    response = conn.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert response.error_code == 0, response
    return {g.group_id: g.group_state for g in response.groups}


def describe_error(conn: WireConnection, group: str) -> int:
    [described] = conn.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": [group]}).groups
    return described.error_code


def member(bootstrap: str, group: str) -> Consumer:
    """A librdkafka member of `group` subscribed to TOPIC, once it has its assignment."""
    consumer = Consumer(consumer_config(bootstrap, group))
    consumer.subscribe([TOPIC])

    def assigned() -> bool:
        consumer.poll(0.1)  # serves the rebalance callbacks
        return bool(consumer.assignment())

    wait_until(assigned, timeout=30.0, what=f"{group}'s member to get its assignment")
    return consumer


def holds(predicate, seconds: float) -> None:
    """`predicate` stays true for `seconds` (an absence is only observed over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate()
        time.sleep(0.1)


def test_offsets_and_empty_groups_expire(server: ServerProcess) -> None:
    bootstrap = server.bootstrap
    active = member(bootstrap, "active")
    active.commit(offsets=[TopicPartition(TOPIC, 0, 11), TopicPartition(OTHER, 0, 12)], asynchronous=False)
    emptied = member(bootstrap, "emptied")
    emptied.commit(offsets=[TopicPartition(TOPIC, 0, 21)], asynchronous=False)
    emptied.close()  # leaves: the group is Empty from now
    emptied_at = time.monotonic()
    member(bootstrap, "idle").close()
    with WireConnection(bootstrap) as conn:
        assert conn.commit_offsets("standalone", TOPIC, {0: 31}) == {0: 0}
        assert kip848.join(conn, "m1", group="modern").member_epoch == 2
        assert kip848.commit(conn, "m1", 2, {0: 41}, group="modern", topic=kip848.TOPIC) == {0: 0}
        assert kip848.heartbeat(conn, "m1", -1, group="modern").error_code == 0
        assert committed(conn, "modern", kip848.TOPIC) == 41 and listed(conn).get("modern") == "Empty"
        assert (committed(conn, "emptied"), committed(conn, "standalone")) == (21, 31)
        assert listed(conn).get("emptied") == "Empty"

        # The idle group (no offsets) goes at the next check, well before any retention.
        wait_until(lambda: "idle" not in listed(conn), timeout=10.0, what="the idle group to be deleted")
        assert time.monotonic() - emptied_at < RETENTION_S / 2
        assert listed(conn).get("emptied") == "Empty" and committed(conn, "emptied") == 21

        wait_until(lambda: committed(conn, "emptied") == -1, timeout=RETENTION_S + 15, interval=0.5,
                   what="emptied's offsets to expire")
        assert time.monotonic() - emptied_at >= RETENTION_S - 1  # not before the retention
        wait_until(lambda: committed(conn, "standalone") == -1, timeout=10.0, what="standalone's offsets to expire")
        wait_until(lambda: committed(conn, "modern", kip848.TOPIC) == -1, timeout=10.0,
                   what="modern's offsets to expire")
        wait_until(lambda: committed(conn, "active", OTHER) == -1, timeout=10.0,
                   what="active's offset of a topic it does not subscribe to, to expire")
        assert committed(conn, "active") == 11  # subscribed: kept
        groups = listed(conn)
        assert "active" in groups and not {"emptied", "standalone", "idle", "modern"} & set(groups), groups
        assert describe_error(conn, "emptied") == ErrorCode.GROUP_ID_NOT_FOUND
        assert describe_error(conn, "active") == 0
        assert kip848.describe(conn, "modern").error_code == ErrorCode.GROUP_ID_NOT_FOUND

        # The expiry is in the log: offset and group tombstones.
        tombstones = {decode_key(r.key) for b in conn.read_all("__consumer_offsets", 0)
                      for r in b.records if r.value is None}
    assert {OffsetKey("emptied", TOPIC, 0), OffsetKey("standalone", TOPIC, 0), OffsetKey("active", OTHER, 0),
            OffsetKey("modern", kip848.TOPIC, 0), GroupKey("emptied"), GroupKey("standalone"),
            GroupKey("idle")} <= tombstones, tombstones
    assert GroupKey("active") not in tombstones

    active.close()  # `active` is Empty from now: a minute before its offset may go
    assert server.stop() == 0
    server.start()
    with WireConnection(bootstrap) as conn:
        assert wait_until(lambda: committed(conn, "active"), timeout=30.0, what="the partition to load") == 11
        assert (committed(conn, "emptied"), committed(conn, "standalone"), committed(conn, "active", OTHER)) == (
            -1, -1, -1)
        groups = listed(conn)
        assert groups.get("active") == "Empty", groups
        assert not {"emptied", "standalone", "idle", "modern"} & set(groups), groups
        assert describe_error(conn, "emptied") == ErrorCode.GROUP_ID_NOT_FOUND
        assert kip848.describe(conn, "modern").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        # Six checks later `active` still has it: it emptied seconds ago, though it committed
        # over a minute ago.
        holds(lambda: committed(conn, "active") == 11, 3.0)
    server.logged("group.offsets_expired", lambda e: e["group"] == "emptied" and e["group_deleted"])
