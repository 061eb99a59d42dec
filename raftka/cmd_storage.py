"""`raftka storage random-uuid` and `raftka storage format`: the click-free halves."""

from __future__ import annotations

import sys

from raftka.log.dir_lock import DirLocked, lock_dirs
from raftka.raft_meta.node_config import ConfigError, load_node_config
from raftka.raft_meta.storage_format import StorageError, format_storage, random_cluster_id


def random_uuid() -> int:
    print(random_cluster_id())
    return 0


def scram_bootstrap_records(arguments: tuple[str, ...]) -> list[bytes]:
    """`--add-scram` arguments -> encoded UserScramCredential records (ValueError if bad)."""
    from raftka.client.protocol.scram import MECHANISMS
    from raftka.raft_meta.records import UserScramCredential, encode_record
    from raftka.scram_args import parse_scram_argument

    records = []
    for text in arguments:
        arg = parse_scram_argument(text, need_name=True)
        cred = arg.credential()
        assert arg.name is not None
        records.append(encode_record(UserScramCredential(arg.name, MECHANISMS[arg.mechanism][0], cred.salt,
                                                         cred.stored_key, cred.server_key, cred.iterations)))
    return records


def format_dirs(config_path: str, cluster_id: str, ignore_formatted: bool, add_scram: tuple[str, ...] = ()) -> int:
    """Write meta.properties into every log dir and the metadata dir (and the SCRAM users to
    create with the cluster, `--add-scram`); exit status."""
    from pathlib import Path

    from raftka.raft_meta.bootstrap_records import write_bootstrap

    try:
        records = scram_bootstrap_records(add_scram)
        config = load_node_config(config_path)
        with lock_dirs([*config.log_dirs, config.metadata_log_dir]):  # not under a running node
            written = format_storage(config, cluster_id, ignore_formatted=ignore_formatted)
            if records:
                Path(config.metadata_log_dir).mkdir(parents=True, exist_ok=True)
                write_bootstrap(Path(config.metadata_log_dir), records)
    except (ConfigError, StorageError, DirLocked, ValueError) as exc:
        print(f"raftka storage format: {exc}", file=sys.stderr)
        return 1
    if records:
        print(f"{len(records)} SCRAM credential(s) will be created with the cluster")
    for directory in written:
        print(f"Formatted {directory} (cluster.id={cluster_id}, node.id={config.node_id})")
    if not written:
        print("Every directory was already formatted with these ids.")
    return 0
