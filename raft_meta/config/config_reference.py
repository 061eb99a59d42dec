"""docs/configuration.md, generated from node_config's key table (the one source of truth)
and the topic, group and client-metrics catalogues.

    python -m raftka.raft_meta.config.config_reference > docs/configuration.md

tests/unit/test_config_reference.py fails when the published page and the table differ,
and `nearest_key` gives the "did you mean" of an unknown key's error. `documentation` is a
key's text on that page: what DescribeConfigs answers when asked to include documentation
(Kafka answers its own ConfigDef's text there).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from functools import cache
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


def _shown_default(default: str | None) -> str:
    return "(none)" if default is None else (f"`{default}`" if default else "(empty)")


def _node_key_text(key: str) -> str:
    """A server.properties key's "expected value" cell."""
    attribute, parser, _ = node_config._KEYS[key]
    alias = next(k for k, (a, _, _) in node_config._KEYS.items() if a == attribute)
    expected = _expected(parser)
    if alias != key:
        expected += f"; the same setting as `{alias}`"
    return expected.replace("|", "/")


@cache
def documentation(resource: str, key: str) -> str:
    """The text docs/configuration.md gives `key` of a `resource` ("topic", "broker", "group" or
    "client-metrics"), in one line: what the value must be, its default, and what raftka does
    with it."""
    if resource == "broker":
        if key in node_config._KEYS:
            return f"{_node_key_text(key)}. Default: {_shown_default(node_config._KEYS[key][2])}."
        if key in node_config._ACCEPTED_IGNORED:
            return "Accepted and ignored (an integer): raftka has no such setting."
        from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS

        found = KAFKA_BROKER_CONFIGS.get(key)
        if found is None:
            return "Not a key of raftka's or of Kafka's broker catalogue."
        return (f"Kafka's broker key ({found.kind}, default {_shown_default(found.default)}); "
                f"in raftka: {_in_raftka(key, found.dynamic)}.")
    if resource == "topic":
        from raftka.raft_meta.config.topic_configs import TOPIC_CONFIGS

        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            return "Not a topic config of raftka's."
        acted = "acted on" if spec.effect == "applied" else "stored, not acted on"
        return f"{spec.describe()}. Default: {_shown_default(spec.default)}; {acted}."
    if resource == "group":
        from raftka.raft_meta.config.config_catalogue import GROUP_CONFIGS

        group = GROUP_CONFIGS.get(key)
        if group is None:
            return "Not a group config of raftka's."
        where = f"; unset, the broker's `{group.synonym}`" if group.synonym else ""
        return f"{group.spec.describe()}. Default: {_shown_default(group.spec.default)}{where}."
    if resource == "client-metrics":
        from raftka.raft_meta.config.client_metrics_configs import CLIENT_METRICS_CONFIGS

        kind, default = CLIENT_METRICS_CONFIGS.get(key, ("", ""))
        what = {"list": "a comma-separated list", "int": "an integer"}.get(kind, "")
        return f"{what}. Default: {_shown_default(default)}." if what else "Not a client-metrics config."
    raise ValueError(f"resource {resource!r}; expected topic, broker, group or client-metrics")


def _catalogue_lines() -> list[str]:
    """The topic, group and client-metrics keys, each with its `documentation`."""
    from raftka.raft_meta.config.client_metrics_configs import CLIENT_METRICS_CONFIGS
    from raftka.raft_meta.config.config_catalogue import GROUP_CONFIGS
    from raftka.raft_meta.config.topic_configs import TOPIC_CONFIGS

    sections = (
        ("Topic configs", "topic", sorted(TOPIC_CONFIGS),
         "Per topic (`raftka topics create --config`, `kafka-configs --entity-type topics`); a topic "
         "without its own value takes the broker's default (its `log.*` synonym)."),
        ("Group configs", "group", [k for k, g in GROUP_CONFIGS.items() if not g.internal],
         "Per group (`raftka configs alter --entity-type groups`); a group without its own value "
         "takes the broker's."),
        ("Client-metrics subscriptions", "client-metrics", sorted(CLIENT_METRICS_CONFIGS),
         "Per subscription (`kafka-configs --entity-type client-metrics`, KIP-714)."),
    )
    lines: list[str] = []
    for title, resource, keys, intro in sections:
        lines += ["", f"## {title}", "", intro, "", "| key | documentation |", "|---|---|"]
        lines += [f"| `{key}` | {documentation(resource, key).replace('|', '/')} |" for key in keys]
    return lines


def render() -> str:
    lines = [
        "# Node configuration (server.properties)",
        "",
        "<!-- Generated from raft_meta/config/node_config.py by "
        "`python -m raftka.raft_meta.config.config_reference > docs/configuration.md`; do not edit. -->",
        "",
        "Every key `raftka server start --config FILE` accepts, with Kafka's names and, unless a",
        "note says otherwise, Kafka's meaning. A key not listed here is refused at startup, with",
        "the nearest known key suggested. Sensitive values (`controller.quorum.secret`) never",
        "appear in errors or logs. DescribeConfigs asked to include documentation answers each",
        "key's text on this page (Kafka answers its own description of the key).",
        "",
        f"Required: {', '.join(f'`{k}`' for k in REQUIRED)}.",
        "",
        "| key | default | expected value |",
        "|---|---|---|",
    ]
    for key, (_, _, default) in node_config._KEYS.items():
        lines.append(f"| `{key}` | {_shown_default(default)} | {_node_key_text(key)} |")
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
    return "\n".join(lines + kafka_catalogue_lines() + _catalogue_lines()) + "\n"


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
        lines.append(f"| `{key}` | {_shown_default(found.default).replace('|', '/')} | {found.kind} | "
                     f"{_in_raftka(key, found.dynamic)} |")
    return lines


if __name__ == "__main__":
    print(render(), end="")
