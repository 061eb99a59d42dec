"""`ssl.principal.mapping.rules`: a TLS client certificate's subject DN -> the principal name.

Kafka's SslPrincipalMapper: a comma list of rules, first match wins;
`DEFAULT` yields the DN itself; `RULE:<regex>/<replacement>/[L|U]` applies
when the Java regex matches the WHOLE DN, then replaces every match (Java's
replaceAll; `$1` is a group) and lower/upper-cases with L/U. No rule matching
is an authentication failure (`NoMatchingRule`). The DN is Java's RFC 2253
form (`CN=alice,OU=Eng,O=Acme\\, Inc.,C=US`), which `cryptography`'s
`rfc4514_string()` gives for the keyword attributes (docs/security.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class NoMatchingRule(ValueError):
    """No mapping rule matched the DN."""


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None  # None = DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(text: str) -> str:
    """Java's `$1` / `${name}` / `\\$` replacement syntax -> Python's."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        elif ch == "$" and text.startswith("${", i) and "}" in text[i:]:
            j = text.index("}", i)
            out.append(f"\\g<{text[i + 2:j]}>")
            i = j + 1
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


def _read_until_slash(text: str, pos: int) -> tuple[str, int]:
    out = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text) and text[pos + 1] == "/":
            out.append("/")
            pos += 2
            continue
        if ch == "/":
            return "".join(out), pos + 1
        out.append(ch)
        pos += 1
    raise ValueError("a rule RULE:<regex>/<replacement>/[L|U] (missing '/')")


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Parse the rules; ValueError names what is wrong."""
    rules: list[Rule] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\n,":
            pos += 1
        if pos >= len(text):
            break
        if text.startswith("DEFAULT", pos):
            rules.append(Rule(None))
            pos += len("DEFAULT")
        elif text.startswith("RULE:", pos):
            regex, pos = _read_until_slash(text, pos + len("RULE:"))
            replacement, pos = _read_until_slash(text, pos)
            case = ""
            if pos < len(text) and text[pos] in "LU":
                case, pos = text[pos], pos + 1
            try:
                pattern = re.compile(regex)
            except re.error as exc:
                raise ValueError(f"a valid regex in rule {regex!r}: {exc}") from None
            rules.append(Rule(pattern, _java_replacement(replacement), case))
        else:
            raise ValueError(f"DEFAULT or RULE:<regex>/<replacement>/[L|U], got {text[pos:pos + 30]!r}")
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] != ",":
            raise ValueError(f"rules separated by commas, got {text[pos:pos + 30]!r}")
    if not rules:
        raise ValueError("at least one rule (DEFAULT)")
    return tuple(rules)


def map_principal(rules: tuple[Rule, ...], dn: str) -> str:
    """The principal name for `dn` (without `User:`); NoMatchingRule if no rule applies."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches the certificate subject {dn!r}")
