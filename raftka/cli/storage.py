"""`raftka storage random-uuid`, `format` and `strays`: the click-free halves."""

from __future__ import annotations

import sys

from raftka.log.dir_lock import DirLocked, lock_dirs
from raftka.raft_meta.config.node_config import ConfigError, load_node_config
from raftka.raft_meta.quorum.storage_format import StorageError, format_storage, random_cluster_id


def random_uuid() -> int:
    print(random_cluster_id())
    return 0


def scram_bootstrap_records(arguments: tuple[str, ...]) -> list[bytes]:
    """`--add-scram` arguments -> encoded UserScramCredential records (ValueError if bad)."""
    from raftka.cli.scram_args import parse_scram_argument
    from raftka.client.protocol.scram import MECHANISMS
    from raftka.raft_meta.metadata.records import UserScramCredential, encode_record

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

    from raftka.raft_meta.metadata.bootstrap_records import write_bootstrap

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


def strays(config_path: str, delete: bool) -> int:
    """List the strays under the node's log dirs (log/strays.py); with `delete`, remove them,
    holding every directory lock of the node (so never under a running node); exit status."""
    import contextlib
    import datetime
    from pathlib import Path

    from raftka.log.partition_metadata import protected_dirs
    from raftka.log.strays import find_strays, remove_stray

    try:
        config = load_node_config(config_path)
        guard = lock_dirs([*config.log_dirs, config.metadata_log_dir]) if delete else contextlib.nullcontext()
        with guard:
            found = find_strays([Path(d) for d in config.log_dirs],
                                protected_dirs(config.log_dirs, config.metadata_log_dir))
            if not found:
                print(f"No strays in {', '.join(config.log_dirs)}.")
                return 0
            for stray in found:
                when = ("unknown" if stray.renamed_at_ms is None else datetime.datetime.fromtimestamp(
                    stray.renamed_at_ms / 1000, datetime.UTC).isoformat(timespec="seconds"))
                print(f"{stray.path}\t{stray.kind}\t{stray.size_bytes} bytes\tset aside {when}"
                      f"\t{stray.reason or '(reason not recorded: see the node log)'}")
                if delete:
                    remove_stray(stray)
                    print(f"Removed {stray.path}")
    except (ConfigError, DirLocked) as exc:
        hint = "; stop the node first (--delete runs only while it is stopped)" if isinstance(exc, DirLocked) else ""
        print(f"raftka storage strays: {exc}{hint}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"raftka storage strays: {exc}", file=sys.stderr)
        return 1
    if not delete:
        print(f"{len(found)} stray(s); remove them with --delete while the node is stopped.")
    return 0
