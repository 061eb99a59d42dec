"""LogConfig: Kafka keys, defaults, validation messages."""

from __future__ import annotations

import pytest

from raftka.log.config import LONG_MAX, LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 604_800_000 and c.retention_ms == 604_800_000
    assert c.segment_index_bytes == 10 * 1024 * 1024 and c.index_interval_bytes == 4096
    assert c.max_message_bytes == 1048588 and c.retention_bytes == -1
    assert c.delete_retention_ms == 86_400_000 and c.min_compaction_lag_ms == 0
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert (c.cleanup_policy, c.delete, c.compact) == ("delete", True, False)
    assert not c.log_append_time


def test_from_properties_round_trip() -> None:
    c = LogConfig.from_properties(
        {"segment.bytes": "1000", "cleanup.policy": "delete,compact", "message.timestamp.type": "LogAppendTime"}
    )
    assert c.segment_bytes == 1000 and c.cleanup_policy == "compact,delete" and c.compact and c.delete
    assert c.log_append_time
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.byte": "1"}, r"unknown log config key 'segment.byte' \(value '1'\)"),
        ({"segment.bytes": "lots"}, r"segment.bytes='lots' is not an integer; expected an integer in \[14, "),
        ({"segment.bytes": "13"}, r"segment.bytes=13 is out of range; expected an integer in \[14, "),
        ({"retention.ms": "-2"}, r"retention.ms=-2 is out of range; expected -1 \(forever\) or an integer >= 0"),
        ({"cleanup.policy": "shred"}, r"cleanup.policy='shred' is not valid; expected one of 'delete', 'compact'"),
        ({"message.timestamp.type": "Now"}, r"message.timestamp.type='Now' is not valid"),
        ({"flush.messages": "0"}, r"flush.messages=0 is out of range"),
    ],
)
def test_bad_properties_name_key_value_and_expectation(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_properties(props)


def test_broker_keys() -> None:
    c = LogConfig.from_broker_properties({"log.roll.ms": "5000", "log.retention.bytes": "99", "broker.id": "1"})
    assert c.segment_ms == 5000 and c.retention_bytes == 99
    with pytest.raises(ValueError, match=r"broker config log.roll.ms='x' is not an integer"):
        LogConfig.from_broker_properties({"log.roll.ms": "x"})
