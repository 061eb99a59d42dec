"""The options of a client's `sasl.jaas.config` (username/password), for --command-config files."""

from __future__ import annotations

import re

_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas_options(text: str) -> dict[str, str]:
    """`LoginModule required k="v" k2=v2;` -> {k: v, k2: v2}. ValueError when malformed."""
    body = text.strip()
    if not body.endswith(";"):
        raise ValueError("sasl.jaas.config: expected '<LoginModule> required key=\"value\" ... ;'")
    head = body.split(None, 2)
    if len(head) < 2 or head[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("sasl.jaas.config: expected '<LoginModule> required key=\"value\" ... ;'")
    return {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
            for m in _OPTION.finditer(body[len(head[0]):])}
