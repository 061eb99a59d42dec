"""A broker takes partition roles only from metadata that includes its own registration.

What a node replays from its metadata journal at start may be stale: the
quorum may have moved leaderships (and leader epochs) while it was down.
Leading from that replay accepted writes at an epoch the cluster had left
(found by a new user: `partition.became_leader leader_epoch=0` while the real
leader was at epoch 1). Real processes, real clients.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

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
        # The log file lags the process by the pipe's reader thread.
        events = wait_until(lambda: (found := _events(node.log_path.read_text()[mark:])) and any(
            e.get("event") == "replicas.caught_up" for e in found) and found, timeout=15,
            what="replicas.caught_up in the restarted node's log")
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


def test_a_topic_deleted_while_a_node_was_down_is_set_aside_kept_and_removed_by_the_operator(tmp_path):
    """Roles now come only from the caught-up image, so a returning node never replays a topic's
    deletion; its directory is found stray at catch-up (not assigned by the image). As in Kafka,
    it is renamed `<topic>-<p>.<hex>-stray`, logged and kept (#27: an inference from the image
    is no proof of garbage), never served nor reopened when a topic of the same name comes back,
    listed by `raftka storage strays`, and removed by it only while the node is stopped."""
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
        old_segment = (old_dir / "00000000000000000000.log").read_bytes()
        assert b"old-incarnation-record" in old_segment
        mark = len(node.log_path.read_text())
        cluster.start_node(away, wait=True)
        stray = wait_until(lambda: [e for e in _events(node.log_path.read_text()[mark:])
                                    if e.get("event") == "log.stray_renamed"],
                           timeout=15, what="log.stray_renamed in the restarted node's log")
        assert [e["dir"] for e in stray] == [str(old_dir)], stray
        assert stray[0].get("level") == "warning", stray
        kept = old_dir.parent / stray[0]["renamed_to"]
        assert re.fullmatch(r"reborn-0\.[0-9a-f]{32}-stray", kept.name)
        assert not old_dir.exists()
        assert (kept / "00000000000000000000.log").read_bytes() == old_segment
        assert away not in partition_info(cluster, "reborn").replicas
        assert "reborn" not in _described_topics(cluster, away)  # not served, not counted

        listed = _strays(node.config_path)
        assert listed.returncode == 0, listed.stderr
        assert str(kept) in listed.stdout and "not assigned to this broker" in listed.stdout
        refused = _strays(node.config_path, "--delete")  # the node holds its directory locks
        assert refused.returncode == 1 and "stop the node first" in refused.stderr
        assert kept.is_dir()

        cluster.stop_node(away)
        removed = _strays(node.config_path, "--delete")
        assert removed.returncode == 0, removed.stderr
        assert f"Removed {kept}" in removed.stdout
        assert not kept.exists()
        assert "No strays" in _strays(node.config_path).stdout


def _strays(properties: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftka", "storage", "strays", "--config", str(properties), *args],
                          capture_output=True, text=True, timeout=60)


def _described_topics(cluster, broker: int) -> set[str]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=cluster.nodes[broker].bootstrap)
    try:
        [answer] = client.describe_log_dirs(brokers=[broker])
    finally:
        client.close()
    return {topic["name"] for log_dir in answer["log_dirs"] for topic in log_dir["topics"]}


def _topics(cluster) -> list[str]:
    with cluster.admin() as admin:
        return admin.list_topics()
