"""Ask running voters for their Raft status over pysyncobj's (encrypted) admin channel.

Blocking, for command-line tools (`raftka quorum status`), not for trio code.
"""

from __future__ import annotations

from dataclasses import dataclass

from pysyncobj.utility import TcpUtility, UtilityException

from raftka.raft_meta.config.node_config import NodeConfig

_STATES = {0: "follower", 1: "candidate", 2: "leader"}


@dataclass(frozen=True)
class VoterStatus:
    node_id: int
    address: str
    reachable: bool
    error: str | None = None
    state: str | None = None
    leader_id: int | None = None
    term: int | None = None
    commit_index: int | None = None
    last_applied: int | None = None
    has_quorum: bool | None = None
    # The voter's metadata image: offset of the last record applied, and the digest
    # (`snapshot.image_digest`) of the image at `image_digest_offset` (equal to `image_offset`
    # once the voter is quiet). None: the voter did not say (an older raftka).
    image_offset: int | None = None
    image_digest_offset: int | None = None
    image_digest: str | None = None


def query_voter(node_id: int, address: str, secret: str, ids_by_address: dict[str, int], timeout: float = 3.0) -> VoterStatus:
    try:
        status = TcpUtility(secret, timeout=timeout).executeCommand(address, ["status"])
    except UtilityException as exc:
        return VoterStatus(node_id, address, False, error=str(exc) or "no answer")
    except OSError as exc:
        return VoterStatus(node_id, address, False, error=str(exc))
    if not isinstance(status, dict):
        # TcpUtility returns None when it cannot connect at all.
        return VoterStatus(node_id, address, False, error="cannot connect (or wrong controller.quorum.secret)")
    image = _image_state(address, secret, timeout)
    leader = status.get("leader")
    leader_address = None if leader is None else getattr(leader, "id", str(leader))
    return VoterStatus(
        node_id,
        address,
        True,
        state=_STATES.get(status.get("state"), str(status.get("state"))),
        leader_id=ids_by_address.get(leader_address) if leader_address else None,
        term=status.get("raft_term"),
        commit_index=status.get("commit_idx"),
        last_applied=status.get("last_applied"),
        has_quorum=status.get("has_quorum"),
        image_offset=image.get("image_offset"),
        image_digest_offset=image.get("digest_offset"),
        image_digest=image.get("digest"),
    )


def _image_state(address: str, secret: str, timeout: float) -> dict:
    """The voter's answer to the "image" command (raft_meta/quorum/quorum.py), {} if it gave none."""
    try:
        answer = TcpUtility(secret, timeout=timeout).executeCommand(address, ["image"])
    except (UtilityException, OSError):
        return {}
    return answer if isinstance(answer, dict) else {}


def describe_quorum(config: NodeConfig, timeout: float = 3.0) -> list[VoterStatus]:
    """One status per voter of `controller.quorum.voters`, in id order."""
    secret = config.controller_quorum_secret
    if not secret:
        raise ValueError("controller.quorum.secret (or RAFTKA_QUORUM_SECRET) is needed to talk to the quorum")
    ids = {v.address(): v.node_id for v in config.controller_quorum_voters}
    return [query_voter(v.node_id, v.address(), secret, ids, timeout) for v in config.controller_quorum_voters]
