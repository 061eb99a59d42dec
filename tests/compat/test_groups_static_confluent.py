"""librdkafka (confluent-kafka) static group members (`group.instance.id`, KIP-345) on raftka.

A static member that restarts within its session timeout gets its partitions back
without a rebalance (the other member's callbacks never fire), the process it
replaced is fenced (FENCED_INSTANCE_ID), and a static member that stops for good
leaves only when its session times out.
"""

from __future__ import annotations

import subprocess
import time

import trio

from raftka.client.cluster import Cluster
from raftka.client.group_admin import describe_group
from raftka.client.protocol import ApiKey, ErrorCode, FindCoordinatorRequest, HeartbeatRequest
from tests.integration.cluster_support import create_topic, running_cluster
from tests.integration.groups_support import GROUP_EXTRA, ThreadMember, produce
from tests.integration.sdk_broker import RAFTKA, raftka_env
from tests.support import wait_until

TOPIC = "static-orders"
PARTITIONS = 4
GROUP = "static-billing"
STATIC_SESSION_MS = 8000
STATIC = {"group.instance.id": "worker-1", "session.timeout.ms": STATIC_SESSION_MS}


def _describe(bootstrap: str):
    async def main():
        async with trio.open_nursery() as nursery:
            cluster = Cluster(bootstrap, nursery, client_id="static-test")
            try:
                return await describe_group(cluster, GROUP)
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    return trio.run(main)


def _heartbeat(bootstrap: str, member_id: str, generation: int, instance: str) -> int:
    """The error a Heartbeat from (member_id, instance) gets from the group's coordinator."""
    async def main() -> int:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(bootstrap, nursery, client_id="static-test")
            try:
                await cluster.refresh_metadata()
                found = await cluster.send_any(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=GROUP, key_type=0))
                response = await cluster.send_to(found.node_id, ApiKey.HEARTBEAT, HeartbeatRequest(
                    group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=instance))
                return response.error_code
            finally:
                await cluster.aclose()
                nursery.cancel_scope.cancel()

    return trio.run(main)


def _static_member(view):
    (member,) = [m for m in view.members if m.group_instance_id == "worker-1"]
    return member


def test_static_member_restart_fencing_and_session_timeout(tmp_path):
    with running_cluster(tmp_path / "cluster", nodes=1, extra=GROUP_EXTRA) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=1)
        produce(bootstrap, TOPIC, 0, 200, PARTITIONS)
        other = ThreadMember(bootstrap, GROUP, TOPIC)
        static = restarted = None
        try:
            wait_until(lambda: other.assignment == set(range(PARTITIONS)), timeout=30, interval=0.1,
                       what="the dynamic member to own every partition")
            static = ThreadMember(bootstrap, GROUP, TOPIC, **STATIC)
            wait_until(lambda: len(static.assignment) == 2 and len(other.assignment) == 2
                       and static.assignment | other.assignment == set(range(PARTITIONS)),
                       timeout=40, interval=0.1, what="a 2/2 split with the static member")
            wait_until(lambda: set(static.values) | set(other.values) >= set(range(200)), timeout=30,
                       interval=0.1, what="200 messages consumed")
            before = set(static.assignment)
            calls = (len(other.assigned_calls), len(other.revoked_calls))
            old_id = _static_member(_describe(bootstrap)).member_id

            # Restart the static member: librdkafka sends no LeaveGroup for it, and the new
            # process takes over the old member's place under a new member id.
            static.stop()
            view = _describe(bootstrap)
            assert view.state == "Stable" and _static_member(view).member_id == old_id, view
            restarted = ThreadMember(bootstrap, GROUP, TOPIC, **STATIC)
            wait_until(lambda: restarted.assignment, timeout=30, interval=0.1,
                       what="the restarted static member's assignment")
            assert restarted.assignment == before, "the restarted member got other partitions"
            view = _describe(bootstrap)
            new_id = _static_member(view).member_id
            assert new_id != old_id and view.state == "Stable"
            assert (len(other.assigned_calls), len(other.revoked_calls)) == calls, \
                "the other member went through a rebalance"

            # The replaced process is fenced; the new one is not.
            assert _heartbeat(bootstrap, old_id, 0, "worker-1") == ErrorCode.FENCED_INSTANCE_ID
            assert _heartbeat(bootstrap, new_id, -5, "worker-1") == ErrorCode.ILLEGAL_GENERATION

            # The restart resumed from the committed offsets.
            produce(bootstrap, TOPIC, 200, 40, PARTITIONS)
            wait_until(lambda: set(restarted.values) | set(other.values) >= set(range(200, 240)), timeout=30,
                       interval=0.1, what="the new messages consumed after the restart")
            assert not set(restarted.values) & set(range(200)) - set(static.values), \
                "the restarted member re-read what another member had consumed"

            out = subprocess.run([*RAFTKA, "groups", "describe", "--bootstrap-server", bootstrap, "--group", GROUP],
                                 env=raftka_env(), capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and "GROUP-INSTANCE-ID" in out.stdout and "worker-1" in out.stdout, out

            # Stopped for good: its partitions move only once its session timed out.
            stopped_at = time.monotonic()
            restarted.stop()
            wait_until(lambda: other.assignment == set(range(PARTITIONS)), timeout=40, interval=0.1,
                       what="the static member's partitions to move after its session timeout")
            waited = time.monotonic() - stopped_at
            assert waited >= STATIC_SESSION_MS / 1000 * 0.8, f"moved after {waited:.1f}s, before the session timeout"
            assert len(other.revoked_calls) == calls[1] + 1, "eager: one revoke of everything before the move"
        finally:
            for member in (other, static, restarted):
                if member is not None and member.thread.is_alive():
                    member.stop()
