"""docs/compatibility.md's version table is exactly what the broker advertises."""

from __future__ import annotations

import json
import os
from pathlib import Path

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from raftka.client.protocol.api_keys import SERVED_VERSIONS
from raftka.client.protocol.generate_schemas import (
    _COMMENT,
    EXTRA_SPECS,
    SPEC_NAMES,
    default_resources_dir,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
BEGIN = "<!-- BEGIN API TABLE"
END = "<!-- END API TABLE -->"


def kafka4_floor(key: ApiKey) -> int:
    """The first version in Kafka 4's own spec of the API (kafka-python ships those specs)."""
    path = default_resources_dir() / f"{SPEC_NAMES[key]}Request.json"
    if not path.exists():  # an API kafka-python does not ship (Kafka's spec kept in client/protocol/specs)
        path = EXTRA_SPECS / path.name
    return int(json.loads(_COMMENT.sub("", path.read_text()))["validVersions"].split("-")[0].rstrip("+"))


def _name(key: ApiKey) -> str:
    return "".join(part.capitalize() for part in key.name.split("_"))


def table() -> str:
    lines = ["| API | key | versions served | Kafka 4's floor |", "|---|---:|---|---|"]
    for key, (low, high) in sorted(ADVERTISED_VERSIONS.items()):
        served_low, served_high = SERVED_VERSIONS.get(key, (low, high))
        floor = kafka4_floor(key)
        note = f"v{floor}" + (" (raftka serves older)" if served_low < floor else "")
        served = f"v{served_low}-v{served_high}"
        if (served_low, served_high) != (low, high):
            served += f" (v{low}-v{high} advertised)"
        lines.append(f"| {_name(key)} | {int(key)} | {served} | {note} |")
    return "\n".join(lines)


def test_the_table_is_what_the_broker_advertises():
    text = DOC.read_text()
    start = text.index(BEGIN)
    start = text.index("\n", start) + 1
    end = text.index(END)
    want = table() + "\n"
    if os.environ.get("RAFTKA_DOCS_REWRITE") == "1":
        DOC.write_text(text[:start] + want + text[end:])
        text = DOC.read_text()
        end = text.index(END)
    assert text[start:end] == want, "docs/compatibility.md is stale: RAFTKA_DOCS_REWRITE=1 pytest " + __file__
