"""Generate `schemas.py` from Apache Kafka's message JSON specs.

Kafka's ``clients/src/main/resources/common/message/*.json`` are the
authoritative field lists; kafka-python ships a copy. This script READS those
files (it never imports kafka-python) and writes raftka's declarations,
restricted to the version ranges in `api_keys.DECLARED_VERSIONS`, as plain
Python data. The output is checked in; the runtime never runs this.

    python -m raftka.client.protocol.generate_schemas [RESOURCES_DIR] > client/protocol/schemas.py

Tests also call `message_schema_from_json` to build wider-range schemas (for
example flexible versions raftka does not declare) and exercise the codec's
compact/tagged paths against an independent implementation.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

from raftka.client.protocol import legacy_versions
from raftka.client.protocol.api_keys import DECLARED_VERSIONS, ApiKey
from raftka.client.protocol.schema import (
    MAX_VERSION,
    MISSING,
    PRIMITIVE_TYPES,
    Field,
    MessageSchema,
    VersionRange,
    parse_versions,
)

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)

# ApiKey -> Kafka's spec file stem.
SPEC_NAMES: dict[ApiKey, str] = {
    ApiKey.PRODUCE: "Produce",
    ApiKey.FETCH: "Fetch",
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.METADATA: "Metadata",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.INIT_PRODUCER_ID: "InitProducerId",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs",
    ApiKey.CREATE_PARTITIONS: "CreatePartitions",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.DESCRIBE_QUORUM: "DescribeQuorum",
    ApiKey.DESCRIBE_ACLS: "DescribeAcls",
    ApiKey.CREATE_ACLS: "CreateAcls",
    ApiKey.DELETE_ACLS: "DeleteAcls",
    ApiKey.DELETE_RECORDS: "DeleteRecords",
    ApiKey.ALTER_CONFIGS: "AlterConfigs",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ApiKey.ELECT_LEADERS: "ElectLeaders",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
    ApiKey.SASL_HANDSHAKE: "SaslHandshake",
    ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
    ApiKey.UNREGISTER_BROKER: "UnregisterBroker",
    ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    ApiKey.LIST_TRANSACTIONS: "ListTransactions",
    ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas",
    ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: "DescribeTopicPartitions",
    ApiKey.LIST_CONFIG_RESOURCES: "ListConfigResources",
    ApiKey.SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    ApiKey.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    ApiKey.SHARE_FETCH: "ShareFetch",
    ApiKey.SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets",
}


def default_resources_dir() -> Path:
    """kafka-python's copy of the Kafka message specs (located, not imported)."""
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("kafka-python is not installed; pass the resources dir")
    return Path(next(iter(spec.submodule_search_locations))) / "protocol/schemas/resources"


def snake_case(name: str) -> str:
    """Kafka's CamelCase field name -> snake_case (as kafka-python spells it)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Kafka's specs for APIs kafka-python does not ship (read when `resources` lacks one).
EXTRA_SPECS = Path(__file__).resolve().parent / "specs"


def load_spec(resources: Path, stem: str) -> dict[str, Any]:
    path = resources / f"{stem}.json"
    if not path.exists() and (EXTRA_SPECS / f"{stem}.json").exists():
        path = EXTRA_SPECS / f"{stem}.json"
    text = path.read_text(encoding="utf-8")
    return legacy_versions.apply(json.loads(_COMMENT.sub("", text)))


def _clip(spec: str | None, window: VersionRange) -> str:
    """Restrict a version range to `window`, in Kafka notation ("none" if empty)."""
    if spec is None:
        return "none"
    rng = parse_versions(spec)
    low, high = max(rng.low, window.low), min(rng.high, window.high)
    if low > high:
        return "none"
    if high == window.high:
        return f"{low}+"
    return f"{low}-{high}" if low != high else str(low)


def _default(raw: object, type_name: str) -> object:
    if raw is None:
        return MISSING
    if isinstance(raw, str):
        text = raw.strip()
        if text == "null":
            return None
        if type_name in ("bool",):
            return text == "true"
        if type_name in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return int(text, 0)
        if type_name == "float64":
            return float(text)
        if type_name == "string":
            return text
        return MISSING
    return raw


def _fields(
    raw_fields: list[dict[str, Any]], window: VersionRange, common: dict[str, list[dict[str, Any]]]
) -> tuple[Field, ...]:
    out = []
    for raw in raw_fields:
        versions = _clip(raw.get("versions"), window)
        if versions == "none":
            continue
        type_name = raw["type"]
        elem = type_name[2:] if type_name.startswith("[]") else type_name
        sub: tuple[Field, ...] = ()
        if elem not in PRIMITIVE_TYPES:
            sub = _fields(raw.get("fields") or common[elem], window, common)
        default = _default(raw.get("default"), type_name)
        out.append(
            Field(
                name=snake_case(raw["name"]),
                type=type_name,
                versions=versions,
                nullable=_clip(raw.get("nullableVersions"), window),
                default=default,
                tag=raw.get("tag"),
                tagged=_clip(raw.get("taggedVersions"), window) if "tag" in raw else "none",
                fields=sub,
                flexible=raw.get("flexibleVersions"),
            )
        )
    return tuple(out)


def message_schema_from_json(spec: dict[str, Any], low: int, high: int) -> MessageSchema:
    """Build a MessageSchema for versions low..high from a parsed Kafka spec."""
    window = VersionRange(low, high)
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    return MessageSchema(
        name=spec["name"],
        api_key=spec["apiKey"],
        kind=spec["type"],
        versions=f"{low}-{high}",
        flexible=_clip(spec.get("flexibleVersions"), VersionRange(0, MAX_VERSION)),
        fields=_fields(spec["fields"], window, common),
    )


def _render_field(field: Field, indent: str) -> str:
    args = [repr(field.name), repr(field.type), repr(field.versions)]
    if field.nullable != "none":
        args.append(f"nullable={field.nullable!r}")
    if field.default is not MISSING:
        args.append(f"default={field.default!r}")
    if field.tag is not None:
        args.append(f"tag={field.tag!r}")
        args.append(f"tagged={field.tagged!r}")
    if field.flexible is not None:
        args.append(f"flexible={field.flexible!r}")
    if not field.fields:
        return f"{indent}F({', '.join(args)}),\n"
    inner = "".join(_render_field(f, indent + "    ") for f in field.fields)
    return f"{indent}F({', '.join(args)}, fields=(\n{inner}{indent})),\n"


def render(schemas: list[MessageSchema]) -> str:
    lines = [
        '"""Kafka message declarations for the versions raftka declares.',
        "",
        "GENERATED by `python -m raftka.client.protocol.generate_schemas` from Apache Kafka's",
        "message JSON specs; regenerate rather than edit. Field names are Kafka's,",
        "snake_cased. See schema.py for the vocabulary.",
        '"""',
        "",
        "from raftka.client.protocol.schema import Field as F",
        "from raftka.client.protocol.schema import MessageSchema",
        "",
    ]
    names = []
    for schema in schemas:
        const = snake_case(schema.name).upper()
        names.append(const)
        body = "".join(_render_field(f, "        ") for f in schema.fields)
        lines.append(
            f"{const} = MessageSchema(\n"
            f"    {schema.name!r}, {schema.api_key}, {schema.kind!r}, {schema.versions!r},"
            f" flexible={schema.flexible!r},\n"
            f"    fields=(\n{body}    ),\n)\n"
        )
    lines.append("ALL_SCHEMAS: tuple[MessageSchema, ...] = (")
    lines.extend(f"    {n}," for n in names)
    lines.append(")")
    return "\n".join(lines) + "\n"


def declared_schemas(resources: Path) -> list[MessageSchema]:
    out = []
    for key, (low, high) in DECLARED_VERSIONS.items():
        for kind in ("Request", "Response"):
            spec = load_spec(resources, SPEC_NAMES[key] + kind)
            out.append(message_schema_from_json(spec, low, high))
    return out


def main(argv: list[str]) -> int:
    resources = Path(argv[1]) if len(argv) > 1 else default_resources_dir()
    sys.stdout.write(render(declared_schemas(resources)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
