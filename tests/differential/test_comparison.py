"""The differential suite's pure parts: normalisation, verdicts, the known-differences list and
its page in docs/compatibility.md, and the jar fetch's failure when Maven is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.differential.kafka_jars import KafkaJarsUnavailable, kafka_jars
from tests.differential.normalise import first_error_line, normalise
from tests.differential.runner import (
    KNOWN_DIFFERENCES,
    KnownDifference,
    Outcome,
    StepResult,
    classify,
    known_differences_table,
    load_known,
    problems,
    summary,
)
from tests.differential.scenarios import SCENARIOS
from tests.differential.steps import Step

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "expected"), [
    ("Topic: t\tTopicId: S1b64GYoRNSwU43IPPoiiQ\tPartitionCount: 3",
     "Topic: t TopicId: <uuid> PartitionCount: 3"),
    ("ClusterId:              PpRy1jvCRDCPeUYoPQjodg\nLeaderId:               1",
     "ClusterId: <uuid>\nLeaderId: 1"),
    ("consumer-g-1-0f8e3c1a-6d0b-4f8e-9d55-5b1f1a2b3c4d /127.0.0.1 consumer-g-1",
     "consumer-g-1-<uuid> /127.0.0.1 consumer-g-1"),
    ("connected to 127.0.0.1:39092 and localhost:2901", "connected to <host:port> and <host:port>"),
    ("[2026-11-27 09:25:16,236] ERROR boom (x)", "<time> ERROR boom (x)"),
    ("[2026-11-27 09:25:16,236] WARN noisy (x)\nkept", "kept"),
    ("at 2026-11-27T09:25:16.236Z or 1764235516236", "at <time> or <time>"),
    ("LastFetchTimestamp: 120 ms ago", "LastFetchTimestamp: <N> ms ago"),
    ("HighWatermark:          302\nLeaderEpoch: 7\nFinalizedVersionLevel: 2 Epoch: 304",
     "HighWatermark: <n>\nLeaderEpoch: <n>\nFinalizedVersionLevel: 2 Epoch: <n>"),
    ("1  X9WnuHPXREOvVk5ZUKeBmQ  302  0  5 ms ago  Leader",
     "1 <uuid> <n> 0 <N> ms ago Leader"),
    ("1  AAAAAAAAAAAAAAAAAAAAAA  618  0  1764235516236  1764235516236  Leader",
     "1 AAAAAAAAAAAAAAAAAAAAAA <n> 0 <time> <time> Leader"),
    ("OpenJDK 64-Bit Server VM warning: Sharing is only supported\nout", "out"),
    ("java.lang.Exception: x\n\tat a.b.C.d(C.java:1)\n\t... 3 more", "java.lang.Exception: x"),
    ('{"logDir":"/tmp/k/data"}', '{"logDir":"<log.dir>"}'),
    # Config names, column names and words of 22 characters are not Uuids.
    ("ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence",
     "ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence"),
    ("uuid without digits: ZxqRTPlmKoWNBvCyHsUeGd", "uuid without digits: <uuid>"),
    ("remote.log.manager.thread.pool abcdefghijklmnopqrstuv", "remote.log.manager.thread.pool abcdefghijklmnopqrstuv"),
    ("trailing   \n\n\n", "trailing"),
])
def test_normalise_masks_what_legitimately_differs(raw: str, expected: str) -> None:
    assert normalise(raw, {"/tmp/k/data": "<log.dir>"}) == expected


@pytest.mark.parametrize(("stderr", "expected"), [
    ("", ""),
    ("Processed a total of 6 messages", "Processed a total of 6 messages"),
    ("some context\n<time> ERROR org.Foo: bad\nmore", "<time> ERROR org.Foo: bad"),
    ("Error while executing config command with args '--alter'\n"
     "java.util.concurrent.ExecutionException: o.a.k.InvalidRequestException: outer\n"
     "Caused by: o.a.k.InvalidRequestException: root cause",
     "Caused by: o.a.k.InvalidRequestException: root cause"),
    ("Error while executing config command with args '--alter'\nx.InvalidRequestException: y",
     "x.InvalidRequestException: y"),
    ("x" * 300 + " error", ("x" * 300 + " error")[:200]),
])
def test_first_error_line(stderr: str, expected: str) -> None:
    assert first_error_line(stderr) == expected


def _out(exit: int = 0, stdout: str = "", error: str = "") -> Outcome:
    return Outcome(exit, stdout, error)


@pytest.mark.parametrize(("kafka", "raftka", "verdict"), [
    (_out(0, "a\nb"), _out(0, "a\nb"), "same"),
    (_out(0, "a\nb"), _out(0, "b\na"), "wording"),  # another order
    (_out(1, "Error while executing : Topic 't' already exists.", "ERROR x.TopicExistsException: T"),
     _out(1, "Error while executing : topic 't' exists", "ERROR x.TopicExistsException: t"),
     "wording"),
    # The same exit status for another reason is not wording.
    (_out(1, "Error: x", "ERROR x.InvalidConfigurationException: a"),
     _out(1, "Error: x", "ERROR x.UnsupportedVersionException: a"), "differs"),
    (_out(0, "error: NOT_COORDINATOR"), _out(0, "error: COORDINATOR_LOAD_IN_PROGRESS"), "differs"),
    (_out(0, "Elr: "), _out(0, "Elr: N/A"), "differs"),
    (_out(0, "a"), _out(1, "a"), "differs"),
    (_out(0, "a\nb"), _out(0, "a"), "differs"),
])
def test_classify(kafka: Outcome, raftka: Outcome, verdict: str) -> None:
    assert classify(kafka, raftka) == verdict


def _result(step_id: str, kafka: Outcome, raftka: Outcome, kafka_exit: int = 0) -> StepResult:
    return StepResult(Step(step_id, "kafka-topics", ("--list",), kafka_exit), kafka, raftka)


def test_problems_fail_on_new_changed_and_vanished_differences() -> None:
    known = {"listed-gone": KnownDifference("differs", "r"),
             "listed-kept": KnownDifference("differs", "r"),
             "listed-changed": KnownDifference("differs", "r")}
    results = [
        _result("same", _out(0, "a"), _out(0, "a")),
        _result("new", _out(0, "a"), _out(0, "b")),
        _result("listed-gone", _out(0, "a"), _out(0, "a")),
        _result("listed-kept", _out(0, "a"), _out(0, "b")),
        _result("listed-changed", _out(0, "a\nb"), _out(0, "b\na")),
        _result("broken-step", _out(1, "a"), _out(1, "a")),
    ]
    found = problems(results, known)
    assert [line.split(":", 1)[0] for line in found] == ["new", "listed-gone", "listed-changed", "broken-step"]
    assert "a new difference (differs)" in found[0]
    assert "now the same as Kafka 4.4" in found[1]
    assert "listed as 'differs' but now 'wording'" in found[2]
    assert "Kafka 4.4 itself exited 1, the step expects 0" in found[3]
    assert summary(results, known).splitlines()[0] == (
        "differential vs Kafka 4.4: 6 steps: 3 same, 1 differ in wording, 2 differ")


def test_the_known_differences_name_real_steps_and_are_documented() -> None:
    known = load_known()
    step_ids = [step.id for scenario in SCENARIOS for step in scenario.steps]
    assert len(step_ids) == len(set(step_ids)), "step ids must be unique"
    assert set(known) <= set(step_ids), f"listed but no such step: {sorted(set(known) - set(step_ids))}"
    page = (REPO / "docs" / "compatibility.md").read_text()
    section = page.split("## Differences from Kafka 4.4, measured", 1)[1].split("\n## ", 1)[0]
    assert known_differences_table(known) in section, (
        f"docs/compatibility.md's table and {KNOWN_DIFFERENCES.name} disagree; print the table "
        "with: .venv/bin/python -m tests.differential.runner")


def test_load_known_refuses_an_entry_without_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "known.toml"
    path.write_text('["topics.list"]\nverdict = "differs"\n')
    with pytest.raises(ValueError, match=r"known.toml: \['topics.list'\]"):
        load_known(path)


def test_the_jar_fetch_fails_with_one_line_without_maven(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(KafkaJarsUnavailable) as raised:
        kafka_jars(tmp_path / "cache")
    assert "\n" not in str(raised.value)
    assert "`mvn` is not on PATH" in str(raised.value)
