"""A broker takes partition roles only from metadata that includes its own registration.

What a node replays from its metadata journal at start may be stale: the
quorum may have moved leaderships (and leader epochs) while it was down.
Leading from that replay accepted writes at an epoch the cluster had left
(found by a new user: `partition.became_leader leader_epoch=0` while the real
leader was at epoch 1). Real processes, real clients.
"""

from __future__ import annotations

import json

import confluent_kafka
import pytest

from tests.integration.cluster_support import (
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.support import wait_until

pytestmark = pytest.mark.slow


def _events(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0,
                                         "message.timeout.ms": 30000})
    errors: list = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(40) == 0 and errors == [None], errors


def test_a_restarted_node_takes_no_role_from_the_epochs_it_replays(tmp_path):
    """The old leader comes back: it replays the metadata log from its start, record by record
    (its topic creation made it leader at the old epoch); only the image that includes its new
    registration may give it a role, so its first role for the partition is at the new epoch."""
    with running_cluster(tmp_path, 3) as cluster:
        create_topic(cluster, "stale", 1, 3)
        before = partition_info(cluster, "stale")
        old_leader = before.leader
        others = [i for i in cluster.nodes if i != old_leader]
        cluster.kill(old_leader)  # its journal still says: leader of "stale" at the old epoch
        after = wait_partition(cluster, "stale", lambda p: p.leader in others and p.leader_epoch > before.leader_epoch,
                               exclude={old_leader}, what="a new leader at a newer epoch")
        bootstrap = ",".join(cluster.nodes[i].bootstrap for i in others)
        _produce(bootstrap, "stale", b"acked-at-the-new-epoch")

        node = cluster.nodes[old_leader]
        mark = len(node.log_path.read_text())
        cluster.start_node(old_leader, wait=True)
        wait_partition(cluster, "stale", lambda p: len(p.isr) == 3,
                       what="the restarted replica back in the ISR")
        events = _events(node.log_path.read_text()[mark:])
        roles = [e for e in events if e.get("topic") == "stale"
                 and e.get("event") in ("partition.became_leader", "partition.became_follower")]
        assert roles, "the restarted node took no role for the partition"
        assert min(e["leader_epoch"] for e in roles) >= after.leader_epoch, roles
        deferred = [i for i, e in enumerate(events) if e.get("event") == "replicas.roles_deferred"]
        caught_up = [i for i, e in enumerate(events) if e.get("event") == "replicas.caught_up"]
        assert deferred and caught_up and deferred[0] < caught_up[0]

        consumer = confluent_kafka.Consumer({"bootstrap.servers": node.bootstrap, "group.id": "check",
                                             "auto.offset.reset": "earliest", "log_level": 0})
        try:
            consumer.subscribe(["stale"])
            message = wait_until(lambda: (lambda m: m if m is not None and m.error() is None else None)(
                consumer.poll(1.0)), timeout=30, what="the acked message")
        finally:
            consumer.close()
        assert message.value() == b"acked-at-the-new-epoch"


def test_a_topic_deleted_while_a_node_was_down_leaves_no_directory_behind(tmp_path):
    """Roles now come only from the caught-up image, so a returning node never replays a topic's
    deletion; its directory is found stray at catch-up (not assigned by the image) and deleted,
    as Kafka deletes stray logs. Otherwise it would linger, and a later topic of the same name
    placed on this node would reopen the old records."""
    with running_cluster(tmp_path, 3) as cluster:
        create_topic(cluster, "reborn", 1, 3)
        _produce(cluster.bootstrap, "reborn", b"old-incarnation-record")
        info = partition_info(cluster, "reborn")
        with cluster.admin() as admin:
            controller = admin.describe_cluster().controller_id
        # Neither the partition's leader nor the controller: the deletion must not race an election.
        away = next(i for i in cluster.nodes if i not in (info.leader, controller))
        cluster.kill(away)
        with cluster.admin() as admin:
            admin.delete_topics(["reborn"])
        wait_until(lambda: "reborn" not in _topics(cluster), timeout=30, what="the topic to be deleted")
        wait_until(lambda: away not in cluster.live_brokers(), timeout=30, what=f"broker {away} fenced")
        create_topic(cluster, "reborn", 1, 2)  # placed on the two live brokers

        node = cluster.nodes[away]
        old_dir = node.directory / "data" / "reborn-0"
        assert old_dir.is_dir()
        mark = len(node.log_path.read_text())
        cluster.start_node(away, wait=True)
        events = _events(node.log_path.read_text()[mark:])
        stray = [e for e in events if e.get("event") == "log.stray_deleted"]
        assert [e["dir"] for e in stray] == [str(old_dir)], stray
        assert not old_dir.exists()
        assert away not in partition_info(cluster, "reborn").replicas


def _topics(cluster) -> list[str]:
    with cluster.admin() as admin:
        return admin.list_topics()
