"""`raftka quorum status`: ask every voter of a config's quorum for its Raft view."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from raftka.cli.options import security as command_security
from raftka.cli.runner import Refused, run
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import ConfigError, load_node_config


def quorum_status(config_path: str, as_json: bool, timeout: float) -> int:
    """Print leader, term, commit index and each voter's state; exit 1 if no voter answers."""
    from raftka.raft_meta.quorum.quorum_admin import describe_quorum

    try:
        config = load_node_config(config_path)
        voters = describe_quorum(config, timeout=timeout)
    except (ConfigError, ValueError) as exc:
        print(f"raftka quorum status: {exc}", file=sys.stderr)
        return 1
    reachable = [v for v in voters if v.reachable]
    if as_json:
        print(json.dumps([asdict(v) for v in voters]))
        return 0 if reachable else 1
    leaders = {v.leader_id for v in reachable if v.leader_id is not None}
    leader = leaders.pop() if len(leaders) == 1 else None
    print(f"LeaderId:       {leader if leader is not None else 'none (election in progress or no quorum)'}")
    print(f"LeaderEpoch:    {max((v.term or 0 for v in reachable), default='unknown')}")
    print(f"HighWatermark:  {max((v.commit_index or 0 for v in reachable), default='unknown')}")
    print(f"CurrentVoters:  {[v.node_id for v in voters]}")
    print()
    print(f"{'NodeId':<8}{'Address':<24}{'State':<11}{'Term':<7}{'CommitIdx':<11}{'LastApplied':<12}"
          f"{'ImageOffset':<13}ImageDigest")
    for v in voters:
        if v.reachable:
            digest = "?" if v.image_digest is None else f"{v.image_digest[:16]}@{v.image_digest_offset}"
            print(f"{v.node_id:<8}{v.address:<24}{v.state:<11}{v.term:<7}{v.commit_index:<11}{v.last_applied:<12}"
                  f"{'?' if v.image_offset is None else v.image_offset!s:<13}{digest}")
        else:
            print(f"{v.node_id:<8}{v.address:<24}unreachable: {v.error}")
    return 0 if reachable else 1


def quorum_status_via_broker(bootstrap: str, as_json: bool, timeout: float) -> int:
    """DescribeQuorum through the Kafka protocol, asked of the active controller (the Raft leader)."""
    import trio

    from raftka.client.admin import AsyncAdmin
    from raftka.client.errors import KafkaError
    from raftka.client.protocol import ApiKey

    async def describe():
        async with AsyncAdmin(bootstrap, security=command_security(), default_api_timeout_ms=0) as admin:
            cluster = await admin.describe_cluster()
            if cluster.controller_id < 0:
                raise KafkaError("no active controller is known yet", code=int(ErrorCode.NOT_CONTROLLER), retriable=True)
            body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
            response = await admin.cluster.send_to(cluster.controller_id, ApiKey.DESCRIBE_QUORUM, body, version=1)
            return cluster, response.topics[0].partitions[0]

    async def describe_within_timeout():
        try:
            with trio.fail_after(timeout):
                return await describe()
        except trio.TooSlowError:
            raise Refused(f"cannot describe the quorum via {bootstrap}: no answer within {timeout:g} s") from None

    status, found = run("quorum status", describe_within_timeout)
    if found is None:
        return status
    cluster, part = found
    if part.error_code:
        print(f"raftka quorum status: the controller answered error {part.error_code}; try again", file=sys.stderr)
        return 1
    voters = [{"node_id": v.replica_id, "log_end_offset": v.log_end_offset,
               "lag": part.high_watermark - v.log_end_offset if v.log_end_offset >= 0 else None}
              for v in part.current_voters]
    if as_json:
        print(json.dumps({"leader_id": part.leader_id, "leader_epoch": part.leader_epoch,
                          "high_watermark": part.high_watermark, "controller_id": cluster.controller_id,
                          "voters": voters}))
        return 0
    print(f"ClusterId:      {cluster.cluster_id}")
    print(f"LeaderId:       {part.leader_id}")
    print(f"LeaderEpoch:    {part.leader_epoch}")
    print(f"HighWatermark:  {part.high_watermark}")
    print(f"CurrentVoters:  {[v['node_id'] for v in voters]}")
    print()
    print(f"{'NodeId':<8}{'LogEndOffset':<14}{'Lag':<6}{'Status':<10}")
    for v in voters:
        role = "Leader" if v["node_id"] == part.leader_id else "Follower"
        shown_lag = "?" if v["lag"] is None else str(v["lag"])
        print(f"{v['node_id']:<8}{v['log_end_offset']:<14}{shown_lag:<6}{role:<10}")
    return 0
