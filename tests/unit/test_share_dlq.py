"""broker/group/share_dlq.py's pure parts: when a group has a dead-letter queue, Kafka 4.4's
checks of the DLQ topic (in its order and words), the DLQ records' headers, and how they are cut
into produce requests. The writes themselves: tests/differential/test_share_consumers.py."""

from __future__ import annotations

import pytest

from raftka.broker.group.share_dlq import HEADERS, check_dlq_topic, chunks, dlq_enabled, dlq_records
from raftka.broker.group.share_partition_state import DlqReason, DlqRun
from raftka.log.record_batch import Record


@pytest.mark.parametrize(("share_version", "name", "enabled"), [
    (2, "dlq.t", True),
    (2, "", False),  # no DLQ topic named
    (1, "dlq.t", False),  # share.version 1: no DLQ (Kafka's supportsShareGroupDLQ)
    (0, "dlq.t", False),
])
def test_a_group_has_a_dlq_from_share_version_2_with_a_topic_named(share_version, name, enabled) -> None:
    assert dlq_enabled(share_version, name) is enabled


G = "g"
# (name, prefix, exists, enabled on the topic, auto-create) -> Kafka's message, or "" (fit)
CASES = [
    (("dlq.t", "dlq.", True, True, False), ""),
    (("dlq.t", "dlq.", False, False, True), ""),  # created on first use
    (("other", "", True, True, False), ""),  # an empty prefix allows any name
    (("", "dlq.", False, False, True), "Configured DLQ topic name in share group: g is empty."),
    (("__dlq", "", True, True, True), "Configured DLQ topic name in share group: g cannot start with __, topic: __dlq."),
    (("dlq.t", "dlq.", True, False, True),
     "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.t."),
    (("dlq.t", "dlq.", False, False, False),
     "DLQ topic does not exist and auto create is disabled on cluster for share group: g, topic: dlq.t."),
    (("t", "dlq.", True, True, False),
     "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, topic: t, prefix: dlq.."),  # Kafka's format: "prefix: %s."
    # Kafka's order: the topic's own setting is checked before the prefix.
    (("t", "dlq.", True, False, False), "DLQ is not enabled on configured DLQ topic for share group: g, topic: t."),
]


@pytest.mark.parametrize(("args", "problem"), CASES)
def test_the_dlq_topic_is_checked_as_kafka_does(args, problem) -> None:
    assert check_dlq_topic(G, *args) == problem


def test_one_dlq_record_per_offset_with_the_context_headers_in_kafkas_order() -> None:
    run = DlqRun(7, 8, 3, DlqReason.DELIVERY_COUNT_EXCEEDED)
    got = dlq_records("workers", "jobs", 2, run, {7: (b"k", b"v")}, 1234)
    assert [(r.key, r.value, r.timestamp) for r in got] == [(b"k", b"v", 1234), (None, None, 1234)]
    assert [name for name, _ in got[1].headers] == list(HEADERS)
    assert dict(got[1].headers) == {
        "__dlq.errors.topic": b"jobs", "__dlq.errors.partition": b"2", "__dlq.errors.offset": b"8",
        "__dlq.errors.group": b"workers", "__dlq.errors.delivery.count": b"3",
        "__dlq.errors.message": b"Offset delivery count exceeded the threshold."}


def test_records_are_cut_into_requests_under_the_topics_max_message_bytes() -> None:
    records = [Record(None, b"x" * 400) for _ in range(5)]
    cut = chunks(records, 1500)
    assert [len(c) for c in cut] == [2, 2, 1] and sum(cut, []) == records
    # A record larger than the limit still goes, alone (the topic refuses it: the write fails).
    assert [len(c) for c in chunks([Record(None, b"x" * 5000), Record(None, b"y")], 1500)] == [1, 1]
