"""KIP-848 regular-expression subscriptions: a member's `SubscribedTopicRegex` in Python.

Kafka 4.4 compiles the regex with RE2/J (`com.google.re2j.Pattern`) and a topic matches
when the regex matches its whole name (`matcher(name).matches()`); a regex RE2/J refuses
is INVALID_REGULAR_EXPRESSION (128), "SubscribedTopicRegex `<regex>` is not a valid
regular expression: <description>." This module accepts the subset RE2/J and Python's
`re` share and refuses, with RE2's description, what RE2 refuses and `re` would accept:

- backreferences (`\\1`, `\\k<name>`, `(?P=name)`): "invalid escape sequence" /
  "invalid named capture";
- lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`), atomic groups `(?>`, conditionals `(?(`
  and comments `(?#`: "invalid or unsupported Perl syntax";
- possessive quantifiers (`a*+`, `a++`, `a?+`, `a{2}+`): "bad repetition operator".

`\\Q...\\E` (a literal run) and `\\z` (end of text) are translated. Where RE2/J accepts and
`re` does not (Unicode classes `\\p{...}`, the ungreedy flag `(?U)`), the regex is refused:
topic names are `[a-zA-Z0-9._-]`, so neither is needed to name topics.
"""

from __future__ import annotations

import functools
import re


class InvalidTopicRegex(ValueError):
    """The regex does not compile; `str(exc)` is the description Kafka's message ends with."""


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(", "(?#")


def _translate(regex: str) -> str:
    """The Python spelling of an RE2 regex, or InvalidTopicRegex for what RE2 refuses."""
    out: list[str] = []
    i, n = 0, len(regex)
    in_class = False
    quantified = False  # the previous token was a quantifier
    while i < n:
        c = regex[i]
        if c == "\\":
            nxt = regex[i + 1:i + 2]
            if nxt == "Q":
                end = regex.find("\\E", i + 2)
                literal = regex[i + 2:] if end < 0 else regex[i + 2:end]
                out.append(re.escape(literal) if not in_class else "".join("\\" + ch for ch in literal))
                i = n if end < 0 else end + 2
                quantified = False
                continue
            if not in_class and (nxt.isdigit() and nxt != "0" or nxt == "k"):
                raise InvalidTopicRegex(f"invalid escape sequence: `\\{nxt}`")
            out.append("\\Z" if nxt == "z" and not in_class else c + nxt)
            i += 2
            quantified = False
            continue
        if in_class:
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if regex.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if regex[i:i + 1] == "]":  # a leading ] is literal
                out.append("]")
                i += 1
            quantified = False
            continue
        if c == "(" and regex.startswith("(?", i):
            if regex.startswith("(?P=", i):
                raise InvalidTopicRegex(f"invalid named capture: `{regex[i:]}`")
            for construct in _LOOKAROUND:
                if regex.startswith(construct, i):
                    raise InvalidTopicRegex(f"invalid or unsupported Perl syntax: `{construct}`")
        if c == "+" and quantified:
            raise InvalidTopicRegex(f"bad repetition operator: `{regex[i - 1:i + 1]}`")
        if c in "*+?":
            # `x*?` is lazy, not a second quantifier
            quantified = not (c == "?" and quantified)
        elif c == "{":
            end = regex.find("}", i)
            if end > 0 and re.fullmatch(r"\d+(,\d*)?", regex[i + 1:end]):
                out.append(regex[i:end + 1])
                i = end + 1
                quantified = True
                continue
            quantified = False
        else:
            quantified = False
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def compile_topic_regex(regex: str) -> re.Pattern[str]:
    """The compiled regex, or InvalidTopicRegex with RE2's description of what is wrong."""
    translated = _translate(regex)
    try:
        return re.compile(translated)
    except re.error as exc:
        raise InvalidTopicRegex(exc.msg) from None


def invalid_regex_message(regex: str, exc: InvalidTopicRegex) -> str:
    """Kafka's INVALID_REGULAR_EXPRESSION message (`Utils.throwIfRegularExpressionIsInvalid`)."""
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}."


def matching_topics(regex: str, names) -> frozenset[str]:
    """The topic names the regex matches as a whole (RE2/J `matcher(name).matches()`)."""
    pattern = compile_topic_regex(regex)
    return frozenset(name for name in names if pattern.fullmatch(name))
