"""broker/group/topic_regex.py: what a KIP-848 SubscribedTopicRegex matches and what it refuses
(RE2/J's syntax, as Kafka 4.4's coordinator compiles it), as tables."""

from __future__ import annotations

import pytest

from raftka.broker.group.topic_regex import InvalidTopicRegex, compile_topic_regex, matching_topics

TOPICS = ("orders", "orders-eu", "orders-us", "xorders-eu", "payments", "a.b", "a+b", "__consumer_offsets")


@pytest.mark.parametrize("regex, matched", [
    ("orders-.*", {"orders-eu", "orders-us"}),  # the whole name must match (RE2/J matches())
    ("orders", {"orders"}),
    ("^orders-(eu|us)$", {"orders-eu", "orders-us"}),
    (".*-eu", {"orders-eu", "xorders-eu"}),
    ("a\\.b", {"a.b"}),
    ("\\Qa+b\\E", {"a+b"}),  # a literal run
    ("\\Qa+b", {"a+b"}),  # \Q to the end
    ("[\\w]+", {"orders", "payments", "__consumer_offsets"}),
    ("[]a]\\.b", {"a.b"}),  # a leading ] is literal
    ("(?i)ORDERS", {"orders"}),
    ("(?P<region>orders)-eu", {"orders-eu"}),  # named groups are fine, only backreferences are not
    ("orders-.{2}", {"orders-eu", "orders-us"}),
    ("orders-.*?", {"orders-eu", "orders-us"}),  # lazy, not possessive
    ("orders-eu\\z", {"orders-eu"}),
    ("pay[^x]ents", {"payments"}),
    ("nothing", set()),
])
def test_matches(regex: str, matched: set[str]) -> None:
    assert matching_topics(regex, TOPICS) == matched


@pytest.mark.parametrize("regex, description", [
    ("(?=orders).*", "invalid or unsupported Perl syntax: `(?=`"),
    ("(?!orders).*", "invalid or unsupported Perl syntax: `(?!`"),
    ("(?<=a)b", "invalid or unsupported Perl syntax: `(?<=`"),
    ("(?<!a)b", "invalid or unsupported Perl syntax: `(?<!`"),
    ("(?>a)", "invalid or unsupported Perl syntax: `(?>`"),
    ("(a)?(?(1)b)", "invalid or unsupported Perl syntax: `(?(`"),
    ("a(?#comment)", "invalid or unsupported Perl syntax: `(?#`"),
    ("(a)\\1", "invalid escape sequence: `\\1`"),
    ("(?P<x>a)\\k<x>", "invalid escape sequence: `\\k`"),
    ("(?P<x>a)(?P=x)", "invalid named capture: `(?P=x)`"),
    ("a*+", "bad repetition operator: `*+`"),
    ("a++", "bad repetition operator: `++`"),
    ("a?+", "bad repetition operator: `?+`"),
    ("a{2}+", "bad repetition operator: `}+`"),
    ("[orders", "unterminated character set"),
    ("(orders", "missing ), unterminated subpattern"),
])
def test_refused(regex: str, description: str) -> None:
    with pytest.raises(InvalidTopicRegex) as info:
        compile_topic_regex(regex)
    assert str(info.value) == description


@pytest.mark.parametrize("regex", ["[(?=]x", "[\\1]", "a\\+\\+", "\\(?="])
def test_refusals_look_at_syntax_not_characters(regex: str) -> None:
    """The same characters inside a class or escaped are literals, as in RE2."""
    compile_topic_regex(regex)
