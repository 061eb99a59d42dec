"""librdkafka (confluent-kafka) group consumers against a real 3-node raftka cluster.

One scenario, phase by phase: three members split a 6-partition topic; one
leaves and one is SIGKILLed (its partitions move after the session timeout);
the coordinator's broker is killed (the group finds the new one, committed
offsets intact); finally a restarted member resumes from the committed offsets
and, counted over the whole run, no message was skipped (at-least-once).
"""

from __future__ import annotations

import select
import signal

from raftka.broker.group.group_records import partition_for_group
from tests.integration.cluster_support import (
    bootstrap_of,
    create_topic,
    partition_info,
    running_cluster,
    wait_partition,
)
from tests.integration.groups_support import (
    GROUP_EXTRA,
    ThreadMember,
    produce,
    start_process_member,
)
from tests.support import wait_until

TOPIC = "orders"
PARTITIONS = 6
GROUP = "billing"


def _disjoint_cover(members: list[ThreadMember]) -> bool:
    sets = [m.assignment for m in members]
    return all(sets) and sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


def _consumed(members: list[ThreadMember]) -> set[int]:
    return set().union(*(set(m.values) for m in members))


def test_group_members_split_move_survive_failover_and_resume(tmp_path):
    with running_cluster(tmp_path / "cluster", nodes=3, extra=GROUP_EXTRA) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=3)
        produce(bootstrap, TOPIC, 0, 300, PARTITIONS)

        members = [ThreadMember(bootstrap, GROUP, TOPIC) for _ in range(3)]
        # Every in-process member that ever ran: a member that leaves took its consumed (and
        # committed) values with it, and nobody re-reads those.
        everyone = list(members)
        victim = None
        try:
            # Three members: each partition consumed by exactly one of them.
            wait_until(lambda: _disjoint_cover(members) and all(len(m.assignment) == 2 for m in members),
                       timeout=60, interval=0.1, what="3 members with 2 partitions each")
            wait_until(lambda: _consumed(everyone) >= set(range(300)), timeout=60, interval=0.1,
                       what="the first 300 messages consumed")

            # A member leaves cleanly: its partitions move to the other two.
            members.pop().stop()
            wait_until(lambda: _disjoint_cover(members), timeout=30, interval=0.1,
                       what="the remaining members to take over the leaver's partitions")

            # A member is SIGKILLed: its partitions move after the session timeout.
            victim = start_process_member(bootstrap, GROUP, TOPIC, tmp_path / "victim.log")
            victim_partitions = _wait_assigned_line(victim)
            assert victim_partitions, "the new member got no partitions"
            wait_until(lambda: not (set(victim_partitions) & (members[0].assignment | members[1].assignment))
                       and members[0].assignment and members[1].assignment, timeout=30, interval=0.1,
                       what="the survivors to give up the victim's partitions")
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            wait_until(lambda: _disjoint_cover(members), timeout=40, interval=0.1,
                       what="the SIGKILLed member's partitions to move after the session timeout")
            produce(bootstrap, TOPIC, 300, 150, PARTITIONS)
            wait_until(lambda: _consumed(everyone) >= set(range(450)), timeout=60, interval=0.1,
                       what="450 messages consumed")

            # Kill the coordinator's broker: the group re-finds its coordinator.
            offsets_partition = partition_for_group(GROUP, int(GROUP_EXTRA["offsets.topic.num.partitions"]))
            coordinator = partition_info(cluster, "__consumer_offsets", offsets_partition).leader
            cluster.kill(coordinator)
            wait_partition(cluster, "__consumer_offsets", lambda p: p.leader not in (-1, coordinator),
                           partition=offsets_partition, exclude={coordinator}, timeout=60,
                           what="a new coordinator")
            produce(bootstrap_of(cluster, {coordinator}), TOPIC, 450, 150, PARTITIONS)
            wait_until(lambda: _consumed(everyone) >= set(range(600)), timeout=90, interval=0.1,
                       what="600 messages consumed across the coordinator failover")
        finally:
            for m in members:
                m.stop()
            if victim is not None and victim.poll() is None:
                victim.kill()
                victim.wait()
        seen_before_restart = _consumed(everyone)

        # A restarted member resumes from the committed offsets: nothing skipped.
        bootstrap = bootstrap_of(cluster, {coordinator})
        produce(bootstrap, TOPIC, 600, 60, PARTITIONS)
        restarted = ThreadMember(bootstrap, GROUP, TOPIC)
        try:
            wait_until(lambda: set(restarted.values) >= set(range(600, 660)), timeout=60, interval=0.1,
                       what="the restarted member to consume the new messages")
        finally:
            restarted.stop()
        everything = seen_before_restart | set(restarted.values)
        assert everything == set(range(660)), f"skipped: {sorted(set(range(660)) - everything)[:20]}"
        # Committed offsets were honoured: the restart re-read at most a small uncommitted tail.
        assert len([v for v in restarted.values if v < 600]) < 100


def _wait_assigned_line(process, timeout: float = 40.0) -> list[int]:
    import json
    import time

    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if line.startswith("assigned"):
                partitions = json.loads(line.split(" ", 1)[1])
                if partitions:
                    return partitions
        assert process.poll() is None, "the member process died"
    raise AssertionError("the member process was never assigned partitions")
