"""DeleteRecords' pure parts: the offset asked for, and Kafka's low watermark."""

from __future__ import annotations

import pytest

from raftka.broker.authorized_operations import SUPPORTED_OPERATIONS, to_bitfield
from raftka.broker.handlers.delete_records import low_watermark, target_offset


@pytest.mark.parametrize(("requested", "hw", "expected"), [
    (-1, 10, 10), (0, 10, 0), (10, 10, 10), (11, 10, None), (-2, 10, None), (5, 0, None),
])
def test_target_offset(requested: int, hw: int, expected: int | None) -> None:
    assert target_offset(requested, hw) == expected


@pytest.mark.parametrize(("leader", "followers", "live", "expected"), [
    (6, {2: 6, 3: 6}, {1, 2, 3}, 6),
    (6, {2: 6, 3: 0}, {1, 2, 3}, 0),  # a live follower not there yet holds it back
    (6, {2: 6, 3: 0}, {1, 2}, 6),  # a dead one does not
    (6, {2: 6}, {1, 2, 3}, -1),  # a live follower never heard from: not there yet
    (6, {}, {1}, 6),
])
def test_low_watermark(leader: int, followers: dict, live: set, expected: int) -> None:
    assert low_watermark(leader, followers, (1, 2, 3), 1, live.__contains__) == expected


def test_authorized_operations_bitfields_are_kafkas() -> None:
    # Kafka's values without an authorizer (AclOperation codes as a 32-bit field)
    assert to_bitfield(SUPPORTED_OPERATIONS["topic"]) == 0b1101_1111_1000  # bits 3-8, 10, 11
    assert to_bitfield(SUPPORTED_OPERATIONS["group"]) == (1 << 3) | (1 << 6) | (1 << 8)
    assert to_bitfield([31]) == -(2**31)
