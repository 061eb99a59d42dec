"""What each node believes about the metadata, sampled the way a user would see it.

- `sample_node_metadata`: a Metadata request to one node (on its own listener): the
  topics that node's broker knows and each partition's leader epoch. One `node-metadata` op.
- `quorum_status`: `raftka quorum status --json` (a subprocess: the CLI, with a node's
  server.properties): per voter its role, term, commit index and its metadata image's offset
  and digest. One `quorum-status` op.
- `critical_lines`: the CRITICAL lines of a node's log (pysyncobj's "truncating
  already-applied log entries", structlog events at level critical).

The ops are plain data; chaos/checker.py judges them (metadata-divergence, lost-topic-change,
leader-epoch-regression, quorum-critical).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from raftka.chaos.cluster import QUORUM_BIND_HOST, REAL_CLIENT_OFFSET, ProxiedCluster
from raftka.chaos.workload import Recorder
from raftka.client.connection import BrokerConnection
from raftka.client.errors import KafkaError
from raftka.client.protocol import ApiKey, MetadataRequest
from raftka.testing.local_cluster import Node, _child_env

PROBE = "probe"  # the history's process for samples
# Fields of `raftka quorum status --json` the checker uses.
VOTER_FIELDS = ("node_id", "reachable", "error", "state", "term", "commit_index", "last_applied", "image_offset",
                "image_digest_offset", "image_digest")


async def node_metadata(node: Node, timeout: float = 3.0, port: int | None = None) -> dict[str, dict[int, int]]:
    """{topic: {partition: leader epoch}} as node `node` answers a Metadata request (all topics),
    on `port` (default: the proxied node's own listener, behind its fault proxy)."""
    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            # The node's own listener, not its fault proxy: the probe sees the node whatever the
            # partition, and adds no work to the proxies (each accept there scans /proc).
            port = node.client_port + REAL_CLIENT_OFFSET if port is None else port
            conn = await BrokerConnection.connect(nursery, node.host, port,
                                                  client_id="chaos-probe",
                                                  request_timeout=timeout, connect_timeout=timeout)
            try:
                version = conn.version(ApiKey.METADATA)
                response = await conn.request(ApiKey.METADATA, MetadataRequest(
                    topics=None if version > 0 else [], allow_auto_topic_creation=False), version=version)
            finally:
                await conn.aclose()
    return {t.name: {p.partition_index: getattr(p, "leader_epoch", -1) for p in t.partitions}
            for t in response.topics if not t.error_code}


async def sample_node_metadata(node: Node, rec: Recorder, final: bool = False) -> bool:
    """Record one `node-metadata` op for `node`; False when it did not answer."""
    pid = node.process.pid if node.process is not None else None
    topics = None
    try:
        topics = await node_metadata(node)
    except* (KafkaError, OSError, trio.TooSlowError):  # the connection's nursery may group them
        pass
    if topics is None:
        return False
    rec.record(PROBE, "ok", "node-metadata", {"node": node.node_id, "pid": pid, "final": final, "topics": topics})
    return True


def direct_config(cluster: ProxiedCluster) -> Path:
    """A copy of node 1's server.properties whose voters are the nodes' own quorum listeners
    (not the harness's proxies): the probes see every voter whatever the partition."""
    first = cluster.nodes[min(cluster.nodes)]
    text = first.config_path.read_text()
    voters = ",".join(f"{n.node_id}@{QUORUM_BIND_HOST}:{n.quorum_port}" for _, n in sorted(cluster.nodes.items()))
    lines = [f"controller.quorum.voters={voters}" if line.startswith("controller.quorum.voters=") else line
             for line in text.splitlines()]
    path = Path(cluster.data_dir) / "probe.properties"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)  # it holds the quorum secret
    return path


async def quorum_status(config_path: Path, timeout: float = 3.0) -> list[dict[str, Any]] | None:
    """Every voter's status as `raftka quorum status --config X --json` prints it (None: no answer)."""
    with trio.move_on_after(10 + 5 * timeout):
        result = await trio.run_process(
            [sys.executable, "-m", "raftka", "quorum", "status", "--config", str(config_path), "--json",
             "--timeout", str(timeout)],
            capture_stdout=True, capture_stderr=True, check=False, env=_child_env("WARNING"))
        try:
            voters = json.loads(result.stdout)
        except ValueError:
            return None
        return [{k: v.get(k) for k in VOTER_FIELDS} for v in voters] if isinstance(voters, list) else None
    return None


async def sample_quorum(config_path: Path, rec: Recorder, final: bool = False) -> list[dict[str, Any]] | None:
    voters = await quorum_status(config_path)
    if voters is not None:
        rec.record(PROBE, "ok", "quorum-status", {"final": final, "voters": voters})
    return voters


def converged(voters: list[dict[str, Any]] | None, nodes: int) -> bool:
    """The quorum settled: every voter answered, one of them leads, and all have a digest of
    their latest image at one offset."""
    if not voters or len(voters) != nodes or not all(v.get("reachable") for v in voters):
        return False
    if sum(1 for v in voters if v.get("state") == "leader") != 1:
        return False
    offsets = {(v.get("image_offset"), v.get("image_digest_offset")) for v in voters}
    (image, digest), = offsets if len(offsets) == 1 else ((None, None),)
    return image is not None and image == digest and all(v.get("image_digest") for v in voters)


async def raft_leader(config_path: Path) -> int | None:
    """The voter that says it leads, in the highest term any voter reports (None: none)."""
    voters = await quorum_status(config_path)
    leaders = [v for v in voters or () if v.get("reachable") and v.get("state") == "leader"]
    return max(leaders, key=lambda v: v.get("term") or 0)["node_id"] if leaders else None


CRITICAL_KEEP = 20


def critical_lines(path: Path) -> Iterator[str]:
    """Lines of a node log at level CRITICAL: stdlib's "CRITICAL:logger:message" (pysyncobj)
    and structlog JSON events with "level": "critical"."""
    if not path.exists():
        return
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("CRITICAL:") or '"level": "critical"' in line:
                yield line.rstrip("\n")[:1000]
