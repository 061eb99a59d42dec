"""OffsetCommit v7-v10 and OffsetFetch v1-v10 on the wire, case by case: simple (admin) groups,
a member's commit to an unknown group, a consumer-protocol (KIP-848) member's commits and
fetches at its epoch, a stale one and an unknown one, batched groups (OffsetFetch v8) and
topic ids (v10), unknown topic ids included; a member's commit at the epoch it just moved past,
for a partition it kept and for one it gave up (Kafka 4.4's assignment epochs), also in a
TxnOffsetCommit.

`run(bootstrap)` prints one line per case. The differential suite runs it against Kafka 4.4 and
raftka (tests/differential/client_steps.py) and compares the lines; `KAFKA_44` is what Kafka
4.4 answered, which tests/compat/test_offset_api_versions.py holds raftka to without a JVM.
Member ids and epochs are not printed (each broker makes its own).
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Iterable, Sequence

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection

TOPIC = "dv-t"
PARTITIONS = 2
TIMEOUT = 60.0
ZERO = uuid.UUID(int=0)
UNKNOWN_ID = uuid.UUID(int=12345)
LOADING = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
           ErrorCode.NOT_COORDINATOR}


def _name(code: int) -> str:
    return ErrorCode(code).name if code else "NONE"


class Cases:
    def __init__(self, conn: WireConnection) -> None:
        self.conn = conn
        self.deadline = time.monotonic() + TIMEOUT
        self.topic_id = ZERO

    def _retry(self, send, loading) -> object:
        """`send()` again while the coordinator loads (a fresh broker's first group requests)."""
        while True:
            response = send()
            if not loading(response) or time.monotonic() > self.deadline:
                return response
            time.sleep(0.2)  # polling the coordinator under the deadline above

    def setup(self) -> None:
        assert self.conn.create_topic(TOPIC, PARTITIONS) == 0

        def described():
            return self.conn.request(ApiKey.METADATA, 12, {
                "topics": [{"topic_id": ZERO, "name": TOPIC}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}).topics[0]

        topic = self._retry(described, lambda t: t.error_code or len(t.partitions) < PARTITIONS
                            or any(p.leader_id < 0 for p in t.partitions))
        self.topic_id = topic.topic_id
        # As a client does first: a fresh broker creates __consumer_offsets on this.
        self._retry(lambda: self.conn.find_coordinator("dv-cg"), lambda r: r.error_code in LOADING)

    def _topic(self, version: int, first_id_version: int, t) -> str:
        if version < first_id_version:
            return t.name
        return "id=" + ("topic" if t.topic_id == self.topic_id else "zero" if t.topic_id == ZERO else "other")

    def commit(self, version: int, group: str, generation: int, member: str,
               topics: Iterable[tuple[object, Sequence[int]]], instance: str | None = None) -> str:
        key = "topic_id" if version >= 10 else "name"
        body = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                "group_instance_id": instance, "retention_time_ms": -1, "topics": [
                    {key: t, "partitions": [{"partition_index": p, "committed_offset": 5,
                                             "committed_leader_epoch": -1, "committed_metadata": "m"}
                                            for p in parts]} for t, parts in topics]}
        response = self._retry(lambda: self.conn.request(ApiKey.OFFSET_COMMIT, version, body),
                               lambda r: any(p.error_code in LOADING for t in r.topics for p in t.partitions))
        return " ".join(f"{self._topic(version, 10, t)}:" + ",".join(
            f"{p.partition_index}={_name(p.error_code)}" for p in t.partitions) for t in response.topics)

    def fetch(self, version: int, groups: Sequence[tuple[str, str | None, int, object]]) -> str:
        """v8+: a batch of (group, member id, member epoch, topics or None); v1-7: one group."""
        if version < 8:
            ((group, _, _, topics),) = groups
            response = self.conn.request(ApiKey.OFFSET_FETCH, version, {
                "group_id": group, "require_stable": False,
                "topics": None if topics is None else [{"name": t, "partition_indexes": p} for t, p in topics]})
            return f"{_name(getattr(response, 'error_code', 0))} " + " ".join(sorted(
                f"{t.name}:" + ",".join(f"{p.partition_index}={p.committed_offset}/{_name(p.error_code)}"
                                        for p in sorted(t.partitions, key=lambda p: p.partition_index))
                for t in response.topics))
        key = "topic_id" if version >= 10 else "name"
        response = self.conn.request(ApiKey.OFFSET_FETCH, version, {"require_stable": False, "groups": [
            {"group_id": g, "member_id": member, "member_epoch": epoch,
             "topics": None if topics is None else [{key: t, "partition_indexes": p} for t, p in topics]}
            for g, member, epoch, topics in groups]})
        out = []
        for g in response.groups:
            topics = sorted(f"{self._topic(version, 10, t)}:" + ",".join(
                f"{p.partition_index}={p.committed_offset}/{p.metadata}/{_name(p.error_code)}"
                for p in sorted(t.partitions, key=lambda p: p.partition_index)) for t in g.topics)
            out.append(f"[{g.group_id} {_name(g.error_code)} {' '.join(topics)}]")
        return " ".join(out)

    def heartbeat(self, group: str, member: str = "", epoch: int = 0):
        body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": [TOPIC] if epoch == 0 else None, "server_assignor": None,
                "topic_partitions": [] if epoch == 0 else None}
        return self._retry(lambda: self.conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body),
                           lambda r: r.error_code in LOADING)


def assignment_epoch_cases(c: Cases) -> list[str]:
    """Kafka 4.4's assignment epochs (KIP-1251): member a holds both partitions of group dv-ep,
    b joins, a revokes one and moves to the next epoch; a commit a sent at its old epoch
    counts for the partition it kept (held since then), not for the one it gave up."""
    def heartbeat(member: str, epoch: int, owned: list[dict] | None):
        body = {"group_id": "dv-ep", "member_id": member, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                "subscribed_topic_names": [TOPIC] if epoch == 0 else None, "server_assignor": None,
                "topic_partitions": owned}
        return c._retry(lambda: c.conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body),
                        lambda r: r.error_code in LOADING)

    def owns(answer) -> list[dict]:
        return [{"topic_id": t.topic_id, "partitions": sorted(t.partitions)} for t in answer.assignment.topic_partitions]

    a = heartbeat("", 0, [])
    a_id, a_epoch, owned = a.member_id, a.member_epoch, owns(a) if a.assignment is not None else []
    b = heartbeat("", 0, [])
    old_epoch, before = a_epoch, sorted(p for t in owned for p in t["partitions"])
    # a revokes what b gets, then moves to the next epoch. Kafka 4.4 computes the new target
    # assignment up to group.consumer.assignment.interval.ms (1 s) after b joined; raftka at once.
    for _ in range(100):
        answer = heartbeat(a_id, a_epoch, owned)
        if answer.error_code:
            return [f"epochs: a's heartbeat {_name(answer.error_code)}"]
        a_epoch = answer.member_epoch
        if answer.assignment is not None:
            owned = owns(answer)
        if a_epoch > old_epoch:
            break
        time.sleep(0.1)  # polled: the coordinator computes the assignment between heartbeats
    kept = sorted(p for t in owned for p in t["partitions"])
    gone = sorted(set(before) - set(kept))
    out = [f"epochs: a held {before}, holds {len(kept)} of them one epoch later: "
           f"{a_epoch == old_epoch + 1 and len(kept) == 1 and len(gone) == 1}"]
    if len(kept) != 1 or len(gone) != 1:
        return out

    label = {kept[0]: "kept", gone[0]: "gone"}

    def labelled(line: str) -> str:  # which partition a keeps may differ between the brokers
        return re.sub(r"([:,])(\d+)=", lambda m: f"{m.group(1)}{label[int(m.group(2))]}=", line)
    out += [
        "commit v9 older epoch, partition held since: " + labelled(c.commit(9, "dv-ep", old_epoch, a_id,
                                                                              [(TOPIC, kept)])),
        "commit v10 older epoch, partition held since: " + labelled(c.commit(10, "dv-ep", old_epoch, a_id,
                                                                               [(c.topic_id, kept)])),
        "commit v9 older epoch, partition given up: " + labelled(c.commit(9, "dv-ep", old_epoch, a_id,
                                                                            [(TOPIC, gone)])),
        "commit v9 older epoch, both partitions: " + labelled(c.commit(9, "dv-ep", old_epoch, a_id,
                                                                         [(TOPIC, kept + gone)])),
        "commit v9 epoch before it held it: " + labelled(c.commit(9, "dv-ep", old_epoch - 1, a_id,
                                                                    [(TOPIC, kept)])),
        "commit v9 current epoch: " + labelled(c.commit(9, "dv-ep", a_epoch, a_id, [(TOPIC, kept)])),
    ]
    out += [f"txn commit v5 older epoch, partition {what}: " + labelled(txn_commit(c, "dv-ep", old_epoch, a_id, ps))
            for what, ps in (("held since", kept), ("given up", gone))]
    for member in (a_id, b.member_id):
        heartbeat(member, -1, None)
    return out


TXN_RETRY = LOADING | {ErrorCode.CONCURRENT_TRANSACTIONS}


def txn_commit(c: Cases, group: str, epoch: int, member: str, partitions: Sequence[int]) -> str:
    """A transactional producer's TxnOffsetCommit v5 (transaction version 2: it adds the offsets'
    partition itself) for `member` at `epoch`, in a transaction then aborted."""
    c._retry(lambda: c.conn.request(ApiKey.FIND_COORDINATOR, 2, {"key": "dv-txn", "key_type": 1}),
             lambda r: r.error_code in LOADING)
    producer = c._retry(lambda: c.conn.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": "dv-txn", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}),
        lambda r: r.error_code in TXN_RETRY)
    body = {"transactional_id": "dv-txn", "group_id": group, "producer_id": producer.producer_id,
            "producer_epoch": producer.producer_epoch, "generation_id": epoch, "member_id": member,
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": p, "committed_offset": 6, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p in partitions]}]}
    response = c._retry(lambda: c.conn.request(ApiKey.TXN_OFFSET_COMMIT, 5, body),
                        lambda r: any(p.error_code in TXN_RETRY for t in r.topics for p in t.partitions))
    c._retry(lambda: c.conn.request(ApiKey.END_TXN, 5, {
        "transactional_id": "dv-txn", "producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch,
        "committed": False}), lambda r: r.error_code in TXN_RETRY)
    return " ".join(f"{t.name}:" + ",".join(f"{p.partition_index}={_name(p.error_code)}" for p in t.partitions)
                    for t in response.topics)


def lines(bootstrap: str) -> list[str]:
    """Every case's answer, one line each, in order."""
    with WireConnection(bootstrap, timeout=30) as conn:
        c = Cases(conn)
        c.setup()
        topic, bad = c.topic_id, UNKNOWN_ID
        out = [
            "commit v8 member, unknown group: " + c.commit(8, "dv-none", 3, "m1", [(TOPIC, [0])]),
            "commit v9 member, unknown group: " + c.commit(9, "dv-none", 3, "m1", [(TOPIC, [0])]),
            "commit v9 no member, unknown group: " + c.commit(9, "dv-none", 3, "", [(TOPIC, [0])]),
            "commit v9 simple: " + c.commit(9, "dv-simple", -1, "", [(TOPIC, [0, 1]), ("dv-missing", [0]),
                                                                     (TOPIC, [7])]),
            "commit v10 simple: " + c.commit(10, "dv-simple10", -1, "", [(topic, [0, 1]), (bad, [0])]),
            "fetch v1: " + c.fetch(1, [("dv-simple", None, -1, [(TOPIC, [0, 1, 3]), ("dv-missing", [0])])]),
            "fetch v7 all: " + c.fetch(7, [("dv-simple", None, -1, None)]),
            "fetch v8 batch: " + c.fetch(8, [("dv-simple", None, -1, None),
                                             ("dv-simple10", None, -1, [(TOPIC, [0, 5])]),
                                             ("dv-nothing", None, -1, None),
                                             ("dv-nothing2", None, -1, [(TOPIC, [0])])]),
            "fetch v10 ids: " + c.fetch(10, [("dv-simple10", None, -1, [(topic, [0, 1]), (bad, [0])]),
                                             ("dv-simple", None, -1, None)]),
            "fetch v9 members of a simple group: " + c.fetch(9, [("dv-simple", "someone", 3, None),
                                                                 ("dv-simple", "", -1, None)]),
        ]
        joined = c.heartbeat("dv-cg")
        member, epoch = joined.member_id, joined.member_epoch
        out += [
            f"join: {_name(joined.error_code)}",
            "commit v8 member: " + c.commit(8, "dv-cg", epoch, member, [(TOPIC, [0])]),
            "commit v9 member: " + c.commit(9, "dv-cg", epoch, member, [(TOPIC, [0])]),
            "commit v10 member: " + c.commit(10, "dv-cg", epoch, member, [(topic, [1])]),
            "commit v9 newer epoch: " + c.commit(9, "dv-cg", epoch + 1, member, [(TOPIC, [0])]),
            "commit v9 older epoch: " + c.commit(9, "dv-cg", epoch - 1, member, [(TOPIC, [0])]),
            "commit v9 unknown member: " + c.commit(9, "dv-cg", epoch, "nobody", [(TOPIC, [0])]),
            "commit v9 empty member id: " + c.commit(9, "dv-cg", epoch, "", [(TOPIC, [0])]),
            "commit v9 admin, group not empty: " + c.commit(9, "dv-cg", -1, "", [(TOPIC, [0])]),
            "commit v7 admin, group not empty: " + c.commit(7, "dv-cg", -1, "", [(TOPIC, [0])]),
            "commit v9 member with an instance id: " + c.commit(9, "dv-cg", epoch, member, [(TOPIC, [0])],
                                                                instance="inst"),
            "fetch v9 member: " + c.fetch(9, [("dv-cg", member, epoch, [(TOPIC, [0, 1])])]),
            "fetch v9 stale epoch: " + c.fetch(9, [("dv-cg", member, epoch + 1, [(TOPIC, [0, 1])])]),
            "fetch v9 unknown member: " + c.fetch(9, [("dv-cg", "nobody", epoch, None)]),
            "fetch v9 empty member id: " + c.fetch(9, [("dv-cg", "", -1, None)]),
            "fetch v9 member, epoch -1: " + c.fetch(9, [("dv-cg", member, -1, None)]),
            "fetch v10 member: " + c.fetch(10, [("dv-cg", member, epoch, [(topic, [0, 1]), (bad, [2])])]),
            "fetch v7 admin: " + c.fetch(7, [("dv-cg", None, -1, None)]),
        ]
        left = c.heartbeat("dv-cg", member, -1)
        out += [
            f"leave: {_name(left.error_code)} {left.member_epoch}",
            "commit v9 admin, group empty: " + c.commit(9, "dv-cg", -1, "", [(TOPIC, [0])]),
            "commit v9 member that left: " + c.commit(9, "dv-cg", epoch, member, [(TOPIC, [0])]),
            "fetch v9 member that left: " + c.fetch(9, [("dv-cg", member, epoch, None)]),
        ]
        return out + assignment_epoch_cases(c)


def join_and_acknowledge(bootstrap: str, group: str, topic: str, member: str) -> str:
    """A consumer-protocol member (ConsumerGroupHeartbeat v1, its own id) joins `group` on
    `topic` and heartbeats until it owns its whole assignment; it then stops heartbeating and
    stays a member for its session. What it owns, without epochs."""
    with WireConnection(bootstrap, timeout=30, client_id="dm-client") as conn:
        c = Cases(conn)
        c._retry(lambda: conn.find_coordinator(group), lambda r: r.error_code in LOADING)
        owned: list[dict] | None = []
        epoch, answer = 0, None
        for _ in range(100):  # each heartbeat answers at once; a few settle the assignment
            body = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
                    "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                    "subscribed_topic_names": [topic] if epoch == 0 else None, "subscribed_topic_regex": None,
                    "server_assignor": "uniform" if epoch == 0 else None, "topic_partitions": owned}
            response = c._retry(lambda body=body: conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body),
                                lambda r: r.error_code in LOADING)
            if response.error_code:
                return f"error: {_name(response.error_code)}"
            epoch = response.member_epoch
            if response.assignment is None and owned:
                return f"owns {answer}"
            if response.assignment is not None:
                owned = [{"topic_id": t.topic_id, "partitions": sorted(t.partitions)}
                         for t in response.assignment.topic_partitions]
                answer = sorted(p for t in owned for p in t["partitions"])
            time.sleep(0.1)  # the coordinator computes the assignment between heartbeats
        return f"no stable assignment: {answer}"


# What Kafka 4.4 answered (tests/differential runs the cases against it again).
KAFKA_44 = """\
commit v8 member, unknown group: dv-t:0=ILLEGAL_GENERATION
commit v9 member, unknown group: dv-t:0=GROUP_ID_NOT_FOUND
commit v9 no member, unknown group: dv-t:0=GROUP_ID_NOT_FOUND
commit v9 simple: dv-missing:0=UNKNOWN_TOPIC_OR_PARTITION dv-t:7=UNKNOWN_TOPIC_OR_PARTITION,0=NONE,1=NONE
commit v10 simple: id=other:0=UNKNOWN_TOPIC_ID id=topic:0=NONE,1=NONE
fetch v1: NONE dv-missing:0=-1/NONE dv-t:0=5/NONE,1=5/NONE,3=-1/NONE
fetch v7 all: NONE dv-t:0=5/NONE,1=5/NONE
fetch v8 batch: [dv-simple NONE dv-t:0=5/m/NONE,1=5/m/NONE] [dv-simple10 NONE dv-t:0=5/m/NONE,5=-1//NONE] \
[dv-nothing NONE ] [dv-nothing2 NONE dv-t:0=-1//NONE]
fetch v10 ids: [dv-simple10 NONE id=other:0=-1//UNKNOWN_TOPIC_ID id=topic:0=5/m/NONE,1=5/m/NONE] \
[dv-simple NONE id=topic:0=5/m/NONE,1=5/m/NONE]
fetch v9 members of a simple group: [dv-simple NONE dv-t:0=5/m/NONE,1=5/m/NONE] \
[dv-simple NONE dv-t:0=5/m/NONE,1=5/m/NONE]
join: NONE
commit v8 member: dv-t:0=UNSUPPORTED_VERSION
commit v9 member: dv-t:0=NONE
commit v10 member: id=topic:1=NONE
commit v9 newer epoch: dv-t:0=STALE_MEMBER_EPOCH
commit v9 older epoch: dv-t:0=STALE_MEMBER_EPOCH
commit v9 unknown member: dv-t:0=UNKNOWN_MEMBER_ID
commit v9 empty member id: dv-t:0=UNKNOWN_MEMBER_ID
commit v9 admin, group not empty: dv-t:0=UNKNOWN_MEMBER_ID
commit v7 admin, group not empty: dv-t:0=UNKNOWN_MEMBER_ID
commit v9 member with an instance id: dv-t:0=NONE
fetch v9 member: [dv-cg NONE dv-t:0=5/m/NONE,1=5/m/NONE]
fetch v9 stale epoch: [dv-cg STALE_MEMBER_EPOCH ]
fetch v9 unknown member: [dv-cg UNKNOWN_MEMBER_ID ]
fetch v9 empty member id: [dv-cg UNKNOWN_MEMBER_ID ]
fetch v9 member, epoch -1: [dv-cg STALE_MEMBER_EPOCH ]
fetch v10 member: [dv-cg NONE id=other:2=-1//UNKNOWN_TOPIC_ID id=topic:0=5/m/NONE,1=5/m/NONE]
fetch v7 admin: NONE dv-t:0=5/NONE,1=5/NONE
leave: NONE -1
commit v9 admin, group empty: dv-t:0=NONE
commit v9 member that left: dv-t:0=UNKNOWN_MEMBER_ID
fetch v9 member that left: [dv-cg UNKNOWN_MEMBER_ID ]
epochs: a held [0, 1], holds 1 of them one epoch later: True
commit v9 older epoch, partition held since: dv-t:kept=NONE
commit v10 older epoch, partition held since: id=topic:kept=NONE
commit v9 older epoch, partition given up: dv-t:gone=STALE_MEMBER_EPOCH
commit v9 older epoch, both partitions: dv-t:kept=STALE_MEMBER_EPOCH,gone=STALE_MEMBER_EPOCH
commit v9 epoch before it held it: dv-t:kept=STALE_MEMBER_EPOCH
commit v9 current epoch: dv-t:kept=NONE
txn commit v5 older epoch, partition held since: dv-t:kept=NONE
txn commit v5 older epoch, partition given up: dv-t:gone=ILLEGAL_GENERATION
""".replace("\\\n", "").splitlines()


if __name__ == "__main__":
    print("\n".join(lines(sys.argv[1])))
