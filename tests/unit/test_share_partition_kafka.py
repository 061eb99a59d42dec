"""broker/group/share_partition_state.py against Apache Kafka 4.4's own SharePartition.

testdata/share_partition_kafka/kafka_4_4.json holds seeded schedules (three members fetching,
acknowledging with ACCEPT/RELEASE/REJECT, some for records they do not hold, locks timing out,
members leaving) for delivery-count limits 2-10 and a tight and the default in-flight window,
with Kafka 4.4's answer to each command and a hash of its state after it (SPSO, next fetch offset,
and each in-flight offset's state, delivery count and owner), recorded by driving Kafka's
SharePartition itself (SpDriver.java, generate.py). raftka's core must give the same answers and
reach the same states. Kafka runs with in-flight batches of one record (batch size 1): raftka
tracks every offset on its own, and Kafka's whole-batch acquisition is not modelled.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from raftka.broker.group.share_partition_state import (
    AcknowledgementBatch,
    RecordState,
    ShareConfig,
    SharePartitionState,
)

LOCK_MS = 30_000
RECORDS = 60
STEPS = 200
# (delivery count limit, max in-flight records, seed)
CONFIGS = [(limit, locks, seed) for limit in (2, 3, 5, 10) for locks in (8, 2000) for seed in (1, 2)]
GOLDEN_PATH = Path(__file__).parent / "testdata" / "share_partition_kafka" / "kafka_4_4.json"
# Missing only while generate.py writes it (it imports this module); test_golden_covers_the_configs fails then.
GOLDEN = json.loads(GOLDEN_PATH.read_text()) if GOLDEN_PATH.exists() else {"kafka": None, "traces": []}


def kafka_view(state: SharePartitionState) -> str:
    """The state in SpDriver's `state` words."""
    parts = [f"spso={state.start_offset} next={state.next_fetch_offset()}"]
    for offset, r in state.records.items():
        if offset >= state.start_offset:
            owner = r.member_id if r.state is RecordState.ACQUIRED else ""
            parts.append(f"{offset}={r.state.name}/{r.delivery_count}/{owner}")
    return " ".join(parts)


def apply(state: SharePartitionState, command: str) -> str:
    """Run one SpDriver command on raftka's core; the answer in SpDriver's words."""
    words = command.split()
    if words[0] == "acquire":
        member, (first, last, now, most, fetch) = words[1], map(int, words[2:7])
        got = state.acquire(member, first, last, now, most, fetch)
        return "acquired" + "".join(f" {o}:{a.delivery_count}" for a in got
                                    for o in range(a.first_offset, a.last_offset + 1))
    if words[0] == "ack":
        batches = []
        for part in words[3].split(";"):
            first, last, kinds = part.split(":")
            batches.append(AcknowledgementBatch(int(first), int(last), tuple(int(k) for k in kinds.split(","))))
        outcome = state.acknowledge(words[1], batches, int(words[2]))
        return "ok" if not outcome.error else "error InvalidRecordStateException"
    if words[0] == "expire":
        state.expire_locks(int(words[1]))
        return "ok"
    if words[0] == "leave":
        state.release_member(words[1])
        return "ok"
    raise ValueError(f"unknown command {command!r}")


def test_golden_covers_the_configs() -> None:
    assert GOLDEN["kafka"] == "kafka-4.4.0"
    assert [(t["limit"], t["locks"], t["seed"]) for t in GOLDEN["traces"]] == CONFIGS
    commands = [row[0].split()[0] for t in GOLDEN["traces"] for row in t["steps"]]
    answers = [row[1] for t in GOLDEN["traces"] for row in t["steps"]]
    assert {"acquire", "ack", "expire", "leave"} <= set(commands)
    assert "error InvalidRecordStateException" in answers  # refused acknowledgements are covered


@pytest.mark.parametrize("trace", GOLDEN["traces"], ids=lambda t: f"limit{t['limit']}-locks{t['locks']}-seed{t['seed']}")
def test_same_answers_and_states_as_kafka(trace: dict) -> None:
    state = SharePartitionState(0, ShareConfig(record_lock_duration_ms=LOCK_MS, max_record_locks=trace["locks"],
                                               delivery_count_limit=trace["limit"]))
    for step, (command, answer, state_hash) in enumerate(trace["steps"]):
        assert apply(state, command) == answer, f"step {step}: {command}"
        view = kafka_view(state)
        assert hashlib.sha1(view.encode()).hexdigest()[:12] == state_hash, f"step {step}: {command}: {view}"
    assert kafka_view(state) == trace["final_state"]
