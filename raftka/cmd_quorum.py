"""`raftka quorum status`: ask every voter of a config's quorum for its Raft view."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from raft_meta.node_config import ConfigError, load_node_config


def quorum_status(config_path: str, as_json: bool, timeout: float) -> int:
    """Print leader, term, commit index and each voter's state; exit 1 if no voter answers."""
    from raft_meta.quorum_admin import describe_quorum

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
    print(f"{'NodeId':<8}{'Address':<24}{'State':<11}{'Term':<7}{'CommitIdx':<11}{'LastApplied':<12}")
    for v in voters:
        if v.reachable:
            print(f"{v.node_id:<8}{v.address:<24}{v.state:<11}{v.term:<7}{v.commit_index:<11}{v.last_applied:<12}")
        else:
            print(f"{v.node_id:<8}{v.address:<24}unreachable: {v.error}")
    return 0 if reachable else 1
