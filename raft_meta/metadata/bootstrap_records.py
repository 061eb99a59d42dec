"""Records written by `storage format` (e.g. `--add-scram`) and committed with the first
controller claim of a new cluster, as Kafka's `bootstrap.checkpoint` is.

The file `bootstrap.records` in the metadata log dir holds a CBOR list of
encoded records (owner-only permissions: SCRAM credentials are not passwords,
but they are what an attacker would try offline). The first active controller
of a cluster whose metadata log is still empty commits them in the same Raft
entry as its ControllerClaim; later claims never look at the file again.
"""

from __future__ import annotations

from pathlib import Path

import cbor2

from raftka.log.atomic_file import atomic_write
from raftka.raft_meta.metadata.records import (
    Config,
    UndecodableRecord,
    decode_record,
    encode_record,
)

BOOTSTRAP_FILE = "bootstrap.records"


def write_bootstrap(directory: Path, encoded_records: list[bytes]) -> None:
    atomic_write(Path(directory) / BOOTSTRAP_FILE, cbor2.dumps(list(encoded_records)), mode=0o600)


def read_bootstrap(directory: str | Path) -> tuple[bytes, ...]:
    """The encoded records, () when there is no file; ValueError when it is unreadable."""
    path = Path(directory) / BOOTSTRAP_FILE
    if not path.exists():
        return ()
    try:
        items = cbor2.loads(path.read_bytes())
    except Exception as exc:  # cbor2 raises several types on garbage
        raise ValueError(f"{path}: not a bootstrap records file: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(i, bytes) for i in items):
        raise ValueError(f"{path}: expected a CBOR list of encoded records")
    for item in items:
        if isinstance(decode_record(item), UndecodableRecord):
            raise ValueError(f"{path}: holds a record this version cannot read")
    return tuple(items)


def cluster_default_records(min_insync_replicas: int) -> tuple[bytes, ...]:
    """The cluster-wide dynamic default Kafka 4.4 writes when a cluster is formatted (for its
    eligible leader replicas): `min.insync.replicas`, the first controller's static value, which
    topics without their own value inherit and DescribeConfigs shows as
    DYNAMIC_DEFAULT_BROKER_CONFIG."""
    return (encode_record(Config("cluster", "", "min.insync.replicas", str(min_insync_replicas))),)
