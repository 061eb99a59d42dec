"""`meta.properties`: the storage format stamp Kafka writes with `kafka-storage format`.

Every log dir and the metadata dir get a `meta.properties` holding the
cluster id, the node id and the format version. A node refuses to start
(`StorageError`) on a directory that is unformatted or that belongs to
another node or cluster; peers with another cluster id are caught when the
first ControllerClaim is applied (see `metadata_loader`).

`voter.started=true` (raftka's own key; Kafka's parser ignores unknown keys) is added to every
storage dir's meta.properties when a voter first creates its metadata journal: from then on a
missing journal means a journal lost, not a node never started (`raft_meta/quorum/voter_guard.py`).
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from raftka.log.atomic_file import atomic_write
from raftka.raft_meta.config.node_config import NodeConfig, parse_properties

META_PROPERTIES = "meta.properties"
FORMAT_VERSION = 1
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


class StorageError(RuntimeError):
    """Storage that is missing, unformatted, or formatted for another node or cluster."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    version: int = FORMAT_VERSION
    voter_started: bool = False  # this node has created its metadata journal as a voter


def random_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes as unpadded URL-safe base64 (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def check_cluster_id(cluster_id: str) -> str:
    if not _CLUSTER_ID.match(cluster_id):
        raise StorageError(
            f"cluster id {cluster_id!r} is not valid; expected 22 URL-safe base64 characters "
            "as printed by `raftka storage random-uuid`"
        )
    return cluster_id


def storage_dirs(config: NodeConfig) -> list[Path]:
    """Every directory that carries a meta.properties: each log dir and the metadata dir."""
    dirs: list[Path] = []
    for raw in (*config.log_dirs, config.metadata_log_dir):
        path = Path(raw)
        if path not in dirs:
            dirs.append(path)
    return dirs


def write_meta_properties(directory: Path, meta: MetaProperties) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    text = (
        "# Written by raftka storage format; do not edit.\n"
        f"cluster.id={meta.cluster_id}\n"
        f"node.id={meta.node_id}\n"
        f"version={meta.version}\n"
        + ("voter.started=true\n" if meta.voter_started else "")
    )
    atomic_write(directory / META_PROPERTIES, text.encode("utf-8"))


def read_meta_properties(directory: Path) -> MetaProperties:
    path = directory / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StorageError(
            f"{str(path)!r} does not exist: the directory is not formatted; "
            "run `raftka storage format --config <server.properties> --cluster-id <id>` first"
        ) from None
    props = parse_properties(text)
    try:
        meta = MetaProperties(props["cluster.id"], int(props["node.id"]), int(props["version"]),
                              props.get("voter.started", "false") == "true")
    except (KeyError, ValueError) as exc:
        raise StorageError(f"{str(path)!r} is damaged ({exc!r}); expected cluster.id, node.id and version") from None
    if meta.version != FORMAT_VERSION:
        raise StorageError(f"{str(path)!r}: version {meta.version} is not supported; expected {FORMAT_VERSION}")
    return meta


def format_storage(config: NodeConfig, cluster_id: str, ignore_formatted: bool = False) -> list[Path]:
    """Write meta.properties into every storage dir; returns the dirs written.

    A dir already formatted with the same cluster and node id is left alone
    when `ignore_formatted`, else it is an error (as `kafka-storage format`).
    """
    check_cluster_id(cluster_id)
    wanted = MetaProperties(cluster_id, config.node_id)
    written = []
    for directory in storage_dirs(config):
        if (directory / META_PROPERTIES).exists():
            existing = read_meta_properties(directory)
            if (existing.cluster_id, existing.node_id) == (wanted.cluster_id, wanted.node_id) and ignore_formatted:
                continue
            raise StorageError(
                f"{str(directory)!r} is already formatted (cluster.id={existing.cluster_id}, "
                f"node.id={existing.node_id}); expected an unformatted dir (or --ignore-formatted with the same ids)"
            )
        write_meta_properties(directory, wanted)
        written.append(directory)
    return written


def verify_storage(config: NodeConfig) -> str:
    """Check every storage dir is formatted for this node and one cluster; returns the cluster id."""
    cluster_ids: dict[str, Path] = {}
    for directory in storage_dirs(config):
        meta = read_meta_properties(directory)
        if meta.node_id != config.node_id:
            raise StorageError(
                f"{str(directory / META_PROPERTIES)!r} has node.id={meta.node_id}; "
                f"expected node.id={config.node_id} from the config"
            )
        cluster_ids.setdefault(meta.cluster_id, directory)
    if len(cluster_ids) > 1:
        described = ", ".join(f"{cid} in {str(d)!r}" for cid, d in cluster_ids.items())
        raise StorageError(f"storage dirs disagree on the cluster id ({described}); expected one cluster id")
    return next(iter(cluster_ids))


def voter_started_dirs(dirs: list[Path]) -> list[Path]:
    """The storage dirs whose meta.properties say this node has run as a voter (unformatted
    ones are skipped: `verify_storage` reports them). Blocking I/O."""
    found = []
    for directory in dirs:
        try:
            if read_meta_properties(directory).voter_started:
                found.append(directory)
        except StorageError:
            continue
    return found


def mark_voter_started(dirs: list[Path]) -> None:
    """Add `voter.started=true` to every storage dir's meta.properties (each write atomic and
    fsynced: one of them surviving is enough to refuse a lost journal). Blocking I/O."""
    for directory in dirs:
        meta = read_meta_properties(directory)
        if not meta.voter_started:
            write_meta_properties(directory, MetaProperties(meta.cluster_id, meta.node_id, meta.version, True))
