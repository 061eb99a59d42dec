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
    return "\n".join(lines + kafka_catalogue_lines()) + "\n"


def _in_raftka(key: str, dynamic: bool) -> str:
    from raftka.raft_meta.config.config_catalogue import STORED_BROKER_CONFIGS
    from raftka.raft_meta.config.config_synonyms import DYNAMIC_BROKER_CONFIGS

    if key in DYNAMIC_BROKER_CONFIGS:
        return f"dynamic: the default of topic config `{DYNAMIC_BROKER_CONFIGS[key]}`"
    if key in STORED_BROKER_CONFIGS and STORED_BROKER_CONFIGS[key].effect == "applied":
        return "dynamic: acted on"
    if key in STORED_BROKER_CONFIGS or dynamic:
        return "dynamic: stored, not acted on"
    return "not acted on"


def kafka_catalogue_lines() -> list[str]:
    """The keys of Kafka 4.4's broker catalogue that are not server.properties keys of raftka's."""
    from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS

    own = set(node_config._KEYS) | set(node_config._ACCEPTED_IGNORED)
    lines = [
        "",
        "## Kafka's other broker keys: described, not acted on",
        "",
        "DescribeConfigs on a broker (`kafka-configs --describe --all --entity-type brokers`) lists",
        "every key of Kafka 4.4's broker catalogue (raft_meta/config/kafka_broker_catalogue.py,",
        "generated from Kafka's jars), as Kafka does. These are not server.properties keys of",
        "raftka's: a file that sets one is refused at startup. They are described with Kafka's",
        "default (`null` where Kafka has none) and raftka does not act on them, except that a",
        "dynamic broker default of a topic config applies to topics (AlterConfigs on a broker or",
        "the cluster-wide default). The other dynamic keys are accepted by AlterConfigs and stored.",
        "",
        "| key | Kafka's default | type | in raftka |",
        "|---|---|---|---|",
    ]
    for key, found in sorted(KAFKA_BROKER_CONFIGS.items()):
        if found.internal or key in own:
            continue
        default = "(none)" if found.default is None else (f"`{found.default}`" if found.default else "(empty)")
        lines.append(f"| `{key}` | {default.replace('|', '/')} | {found.kind} | {_in_raftka(key, found.dynamic)} |")
    return lines


if __name__ == "__main__":
    print(render(), end="")
