"""`raftka metadata dump`: a node's committed metadata records and image, as JSON, from its files."""

from __future__ import annotations

import json
import sys

from raftka.raft_meta.config.node_config import ConfigError, load_node_config


def metadata_dump(config_path: str | None, metadata_dir: str | None, with_records: bool) -> int:
    from raftka.raft_meta.metadata.metadata_dump import (
        MetadataDumpError,
        dump_json,
        read_metadata_log,
    )

    try:
        directory = metadata_dir if metadata_dir is not None else load_node_config(config_path).metadata_log_dir
        out = dump_json(read_metadata_log(directory), with_records=with_records)
    except (ConfigError, MetadataDumpError, OSError) as exc:
        print(f"raftka metadata dump: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 0
