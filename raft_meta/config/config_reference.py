"""docs/configuration.md, generated from node_config's key table (the one source of truth).

    python -m raftka.raft_meta.config.config_reference > docs/configuration.md

tests/unit/test_config_reference.py fails when the published page and the table differ,
and `nearest_key` gives the "did you mean" of an unknown key's error.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from raftka.raft_meta.config import node_config

REQUIRED = ("node.id", "listeners", "controller.quorum.voters", "log.dirs")


def _expected(parser: Callable[[str], Any]) -> str:
    """What a key's parser accepts, in its own words (the text its ValueError carries)."""
    if parser is node_config._str_list:
        return "a comma-separated list"
    for probe in ("-1", "\x00not valid"):
        try:
            parser(probe)
        except ValueError as exc:
            return str(exc)
    return "text"


def known_keys() -> list[str]:
    return [*node_config._KEYS, *sorted(node_config._ACCEPTED_IGNORED)]


def nearest_key(key: str) -> str | None:
    """The known key closest to a mistyped one, or None when none is close."""
    found = difflib.get_close_matches(key, known_keys(), n=1, cutoff=0.75)
    return found[0] if found else None


def render() -> str:
    first_key: dict[str, str] = {}
    lines = [
        "# Node configuration (server.properties)",
        "",
        "<!-- Generated from raft_meta/config/node_config.py by "
        "`python -m raftka.raft_meta.config.config_reference > docs/configuration.md`; do not edit. -->",
        "",
        "Every key `raftka server start --config FILE` accepts, with Kafka's names and, unless a",
        "note says otherwise, Kafka's meaning. A key not listed here is refused at startup, with",
        "the nearest known key suggested. Sensitive values (`controller.quorum.secret`) never",
        "appear in errors or logs.",
        "",
        f"Required: {', '.join(f'`{k}`' for k in REQUIRED)}.",
        "",
        "| key | default | expected value |",
        "|---|---|---|",
    ]
    for key, (attribute, parser, default) in node_config._KEYS.items():
        alias = first_key.setdefault(attribute, key)
        shown_default = "(none)" if default is None else (f"`{default}`" if default else "(empty)")
        expected = _expected(parser)
        if alias != key:
            expected += f"; the same setting as `{alias}`"
        lines.append(f"| `{key}` | {shown_default} | {expected.replace('|', '/')} |")
    lines += [
        "",
        "## Accepted and ignored",
        "",
        "Keys of Kafka's stock server.properties that have no meaning in raftka (threads and",
        "socket buffers are trio's business). Each must be an integer; it is otherwise ignored,",
        "so a Kafka user's file still loads.",
        "",
    ]
    lines += [f"- `{key}`" for key in sorted(node_config._ACCEPTED_IGNORED)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
