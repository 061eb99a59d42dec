"""Runs each step against Kafka 4.4 and raftka, classifies the pair, and checks the verdicts
against the list of known differences (known_differences.toml).

A step's outcome is its exit status, its normalised stdout and the first error line of its
normalised stderr (tests/differential/normalise.py). A pair of outcomes is

- `same`:    exit status, stdout and error line are equal;
- `wording`: the exit status is equal, the stdout lines are equal once lines reporting an error
  are set aside and their order is ignored, and both name the same exception classes: the two
  did the same thing and said it in other words (or another order);
- `differs`: anything else.

A difference not in the list, a listed one of another kind, and a listed one that has gone away
are all failures: the list stays true.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.differential.kafka_jars import KafkaJars
from tests.differential.normalise import first_error_line, normalise
from tests.differential.steps import Step
from tests.differential.tools import run_tool

KNOWN_DIFFERENCES = Path(__file__).resolve().parent / "known_differences.toml"
VERDICTS = ("same", "wording", "differs")


@dataclass(frozen=True)
class Target:
    """A cluster the steps run against: its name, address, and the literal strings of its own
    (paths) that `normalise` replaces with names both clusters share."""
    name: str
    bootstrap: str
    replacements: Mapping[str, str]


@dataclass(frozen=True)
class Outcome:
    exit: int
    stdout: str
    error: str

    def show(self) -> str:
        lines = self.stdout.splitlines()
        shown = [f"      | {line}" for line in lines[:40]]
        if len(lines) > 40:
            shown.append(f"      | ... {len(lines) - 40} more lines")
        return "\n".join([f"exit {self.exit}; stderr: {self.error or '(none)'}", *shown])


@dataclass(frozen=True)
class StepResult:
    step: Step
    kafka: Outcome
    raftka: Outcome

    @property
    def verdict(self) -> str:
        return classify(self.kafka, self.raftka)


@dataclass(frozen=True)
class KnownDifference:
    verdict: str  # "wording" or "differs"
    reason: str


_ERROR_LINE = re.compile(r"error|exception|fail", re.IGNORECASE)
# What an outcome names as its error: Java exception classes, and the Kafka error names the
# client steps print (`error: NOT_COORDINATOR`).
_EXCEPTION = re.compile(r"\b\w*(?:Exception|Error)\b|(?<=error: )[A-Z_]+\b")


def classify(kafka: Outcome, raftka: Outcome) -> str:
    if kafka == raftka:
        return "same"
    if kafka.exit != raftka.exit:
        return "differs"

    def substance(outcome: Outcome) -> tuple[list[str], set[str]]:
        lines = outcome.stdout.splitlines()
        kept = sorted(line for line in lines if line and not _ERROR_LINE.search(line))
        exceptions = set(_EXCEPTION.findall(outcome.stdout + "\n" + outcome.error))
        return kept, exceptions

    return "wording" if substance(kafka) == substance(raftka) else "differs"


def outcome_of(jars: KafkaJars, step: Step, target: Target, work: Path) -> Outcome:
    args = [arg.replace("{bootstrap}", target.bootstrap).replace("{work}", str(work)) for arg in step.args]
    run = run_tool(jars, step.tool, args, stdin=step.stdin, cwd=work)
    stderr = normalise(run.stderr, target.replacements)
    stdout = normalise(run.stdout, target.replacements)
    if step.unordered:
        stdout = "\n".join(sorted(stdout.splitlines()))
    return Outcome(run.exit, stdout, first_error_line(stderr))


def run_steps(jars: KafkaJars, steps: Iterable[Step], kafka: Target, raftka: Target,
              work: Path) -> list[StepResult]:
    """Each step on both clusters at once (two JVMs), one step after the other."""
    results = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for step in steps:
            for name, content in step.files.items():
                (work / name).write_text(content)
            on_kafka = pool.submit(outcome_of, jars, step, kafka, work)
            on_raftka = pool.submit(outcome_of, jars, step, raftka, work)
            results.append(StepResult(step, on_kafka.result(), on_raftka.result()))
    return results


def load_known(path: Path = KNOWN_DIFFERENCES) -> dict[str, KnownDifference]:
    """step id -> its listed difference. Raises ValueError on a malformed entry."""
    known = {}
    for step_id, entry in tomllib.loads(path.read_text()).items():
        verdict, reason = entry.get("verdict"), entry.get("reason", "").strip()
        if verdict not in ("wording", "differs") or not reason or set(entry) - {"verdict", "reason"}:
            raise ValueError(f"{path.name}: [{step_id!r}] = {entry!r}; expected verdict = "
                             "\"wording\" or \"differs\" and a non-empty reason, nothing else")
        known[step_id] = KnownDifference(verdict, reason)
    return known


def problems(results: Sequence[StepResult], known: Mapping[str, KnownDifference]) -> list[str]:
    """What makes the suite fail: a step Kafka itself did not answer as the step expects, a new
    difference, a listed one of another kind, a listed one gone away."""
    out = []
    for result in results:
        step, verdict = result.step, result.verdict
        listed = known.get(step.id)
        both = (f"    Kafka 4.4: {result.kafka.show()}\n    raftka:    {result.raftka.show()}\n"
                f"    (the tool: {step.tool} {' '.join(step.args)[:300]})")
        if result.kafka.exit != step.kafka_exit:
            out.append(f"{step.id}: the step is wrong: Kafka 4.4 itself exited {result.kafka.exit}, "
                       f"the step expects {step.kafka_exit}\n{both}")
        elif verdict != "same" and listed is None:
            out.append(f"{step.id}: a new difference ({verdict}), not in known_differences.toml\n{both}")
        elif verdict != "same" and listed.verdict != verdict:
            out.append(f"{step.id}: listed as {listed.verdict!r} but now {verdict!r}: update "
                       f"known_differences.toml and docs/compatibility.md\n{both}")
        elif verdict == "same" and listed is not None:
            out.append(f"{step.id}: listed as {listed.verdict!r} but now the same as Kafka 4.4: "
                       "remove it from known_differences.toml and docs/compatibility.md")
    return out


def report(results: Sequence[StepResult]) -> list[dict]:
    """Every step's verdict and both outcomes, as plain data (`--compat-report`)."""
    return [{"step": r.step.id, "tool": r.step.tool, "args": list(r.step.args), "verdict": r.verdict,
             "kafka": asdict(r.kafka), "raftka": asdict(r.raftka)} for r in results]


def known_differences_table(known: Mapping[str, KnownDifference]) -> str:
    """docs/compatibility.md's table of known differences, as the list has them."""
    rows = [f"| `{step_id}` | {k.verdict} | {k.reason.replace('|', '/')} |" for step_id, k in known.items()]
    return "\n".join(["| step | verdict | why |", "|---|---|---|", *rows])


def summary(results: Sequence[StepResult], known: Mapping[str, KnownDifference]) -> str:
    """The figures the team quotes: steps that are the same, differ in wording, differ."""
    counts = Counter(result.verdict for result in results)
    lines = [f"differential vs Kafka 4.4: {len(results)} steps: {counts['same']} same, "
             f"{counts['wording']} differ in wording, {counts['differs']} differ"]
    for result in results:
        if result.verdict != "same":
            listed = known.get(result.step.id)
            note = "listed" if listed is not None and listed.verdict == result.verdict else "NEW"
            lines.append(f"  {result.verdict:8} {result.step.id} ({note})")
    return "\n".join(lines)


if __name__ == "__main__":  # prints the table for docs/compatibility.md
    print(known_differences_table(load_known()))
