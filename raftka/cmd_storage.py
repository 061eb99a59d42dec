"""`raftka storage random-uuid` and `raftka storage format`: the click-free halves."""

from __future__ import annotations

import sys

from raftka.log.dir_lock import DirLocked, lock_dirs
from raftka.raft_meta.node_config import ConfigError, load_node_config
from raftka.raft_meta.storage_format import StorageError, format_storage, random_cluster_id


def random_uuid() -> int:
    print(random_cluster_id())
    return 0


def format_dirs(config_path: str, cluster_id: str, ignore_formatted: bool) -> int:
    """Write meta.properties into every log dir and the metadata dir; exit status."""
    try:
        config = load_node_config(config_path)
        with lock_dirs([*config.log_dirs, config.metadata_log_dir]):  # not under a running node
            written = format_storage(config, cluster_id, ignore_formatted=ignore_formatted)
    except (ConfigError, StorageError, DirLocked) as exc:
        print(f"raftka storage format: {exc}", file=sys.stderr)
        return 1
    for directory in written:
        print(f"Formatted {directory} (cluster.id={cluster_id}, node.id={config.node_id})")
    if not written:
        print("Every directory was already formatted with these ids.")
    return 0
