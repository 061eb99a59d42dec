"""Kafka's topic-name rules."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# Kafka's Topic.INTERNAL_TOPICS: written by the brokers' coordinators only, never by a
# client's Produce (INVALID_TOPIC_EXCEPTION), and never auto-created by Metadata.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty; expected 1-249 characters of [a-zA-Z0-9._-]"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long; expected at most {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return f"topic name {name!r} contains characters outside [a-zA-Z0-9._-]"
    return None
