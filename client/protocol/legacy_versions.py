"""The API versions Kafka 4 dropped (KIP-896) that raftka still serves.

Older clients send versions below Kafka 4's protocol baseline: Sarama's consumer groups
(OffsetCommit v0-1), Burrow's lag checks (ListOffsets v0), tools built on kafka-python 1.x or
librdkafka 0.x (DescribeConfigs v0, CreateTopics v0-1, DeleteTopics v0). None of them needs a
message-format conversion (unlike Produce v0-2 and Fetch v0-3, which carry message formats
v0/v1 and stay refused), so raftka serves them.

Kafka 4's message specs still describe every field of the old versions (a field's
`versions` such as `"1"` for CommitTimestamp or `"0"` for OldStyleOffsets); only the spec's
`validVersions` moved up. `apply` moves it back down to the floor below, which is all the
codec needs. docs/compatibility.md lists the floor of every API.
"""

from __future__ import annotations

import re
from typing import Any

# Spec name -> the oldest version raftka serves (below the Kafka 4 spec's validVersions).
FLOORS: dict[str, int] = {
    "OffsetCommitRequest": 0,
    "OffsetCommitResponse": 0,
    "ListOffsetsRequest": 0,
    "ListOffsetsResponse": 0,
    "DescribeConfigsRequest": 0,
    "DescribeConfigsResponse": 0,
    "CreateTopicsRequest": 0,
    "CreateTopicsResponse": 0,
    "DeleteTopicsRequest": 0,
    "DeleteTopicsResponse": 0,
    # v0 (non-flexible) is what Kafka 3.x brokers and coordinators speak; Kafka 4 dropped it.
    "WriteTxnMarkersRequest": 0,
    "WriteTxnMarkersResponse": 0,
}

_RANGE = re.compile(r"^(\d+)(.*)$")


def apply(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` (a parsed Kafka message spec) with `validVersions` starting at raftka's floor."""
    floor = FLOORS.get(spec.get("name", ""))
    m = _RANGE.match(spec.get("validVersions", ""))
    if floor is None or m is None or int(m.group(1)) <= floor:
        return spec
    return {**spec, "validVersions": f"{floor}{m.group(2)}"}
