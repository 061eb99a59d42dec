"""Where a consumer group's offsets go on a reset: kafka-consumer-groups' --reset-offsets (pure).

A scenario names a target per partition: `earliest`, `latest`, `datetime` (the
first offset at or after a time; the latest when no record is that recent),
`shift` (the committed offset plus N; the earliest when nothing is committed,
the way Kafka's tool does) or `offset` (N). As Kafka's tool does, a target
outside the partition's [earliest, latest] is clamped to the nearer end.
`plan_reset` gets every offset it needs from the caller and does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raftka.client.records import TopicPartition

SCENARIOS = ("earliest", "latest", "datetime", "shift", "offset")


@dataclass(frozen=True)
class ResetScenario:
    kind: str
    value: int = 0  # datetime: epoch ms; shift: N (may be negative); offset: N

    def __post_init__(self) -> None:
        if self.kind not in SCENARIOS:
            raise ValueError(f"reset scenario {self.kind!r} is not one of {', '.join(SCENARIOS)}")
        if self.kind == "offset" and self.value < 0:
            raise ValueError(f"--to-offset {self.value} must be 0 or more")


def parse_topic_partitions(spec: str, known: Mapping[str, Sequence[int]]) -> list[TopicPartition]:
    """`topic` (every partition in `known[topic]`) or `topic:0,2` (those partitions)."""
    topic, sep, parts = spec.partition(":")
    if topic not in known:
        raise ValueError(f"topic {topic!r} does not exist")
    if not sep:
        return [TopicPartition(topic, p) for p in known[topic]]
    out = []
    for item in parts.split(","):
        if not item.strip().isdigit() or int(item) not in known[topic]:
            raise ValueError(f"--topic {spec!r}: {item!r} is not a partition of {topic!r} "
                             f"(partitions: {', '.join(map(str, known[topic]))})")
        out.append(TopicPartition(topic, int(item)))
    return out


def plan_reset(scenario: ResetScenario, tps: Sequence[TopicPartition],
               committed: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int],
               by_time: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
    """The new committed offset of every partition in `tps`. `by_time` (for `datetime`) maps
    a partition to the offset ListOffsets answered for the time, -1 for none."""
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        low, high = earliest[tp], latest[tp]
        if scenario.kind == "earliest":
            target = low
        elif scenario.kind == "latest":
            target = high
        elif scenario.kind == "datetime":
            found = (by_time or {}).get(tp, -1)
            target = high if found < 0 else found
        elif scenario.kind == "shift":
            target = committed[tp] + scenario.value if tp in committed else low
        else:
            target = scenario.value
        out[tp] = min(max(target, low), high)
    return out
