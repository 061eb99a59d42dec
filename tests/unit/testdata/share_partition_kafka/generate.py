"""Regenerate kafka_4_4.json: seeded schedules run against Apache Kafka 4.4's own SharePartition
(SpDriver.java), its answers recorded for tests/unit/test_share_partition_kafka.py.

    python -m tests.unit.testdata.share_partition_kafka.generate [KAFKA_LIBS]   (from the repository root)

KAFKA_LIBS: a Kafka 4.4 distribution's libs/ (default ~/.cache/raftka/kafka-4.4.0/libs). Needs a
JDK. raftka's core chooses each next command from its own state (what a broker would send), so
regenerate only after checking the test passes, or the schedules drift.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from raftka.broker.group.share_partition_state import RecordState, ShareConfig, SharePartitionState
from tests.unit.test_share_partition_kafka import CONFIGS, LOCK_MS, RECORDS, STEPS, apply

HERE = Path(__file__).resolve().parent


def schedule(seed: int, limit: int, locks: int, ask) -> list[list[str]]:
    """Run one seeded schedule on raftka's core and Kafka's (`ask`): [command, answer, state hash]."""
    rng = random.Random(seed)
    state = SharePartitionState(0, ShareConfig(record_lock_duration_ms=LOCK_MS, max_record_locks=locks,
                                               delivery_count_limit=limit))
    now, rows = 0, []
    while len(rows) < STEPS:
        action = rng.choices(["acquire", "ack", "expire", "leave"], [5, 5, 2, 0.5])[0]
        member = rng.choice(["m1", "m2", "m3"])
        if action == "acquire":
            first = state.next_fetch_offset()
            if first >= RECORDS:
                action = "expire"  # nothing left to read: let time pass
            else:
                last = min(RECORDS - 1, first + rng.randrange(0, 10))
                command = f"acquire {member} {first} {last} {now} {rng.choice([3, 1000])} {first} 1"
        if action == "ack":
            held = [o for o, r in state.records.items()
                    if r.state is RecordState.ACQUIRED and (r.member_id == member or rng.random() < 0.1)]
            if not held:
                continue
            chosen = sorted(rng.sample(held, rng.randrange(1, len(held) + 1)))
            runs: list[list] = []
            for o in chosen:
                kind = rng.choices([1, 2, 3], [6, 3, 1])[0]
                if runs and runs[-1][1] + 1 == o:
                    runs[-1][1] = o
                    runs[-1][2].append(kind)
                else:
                    runs.append([o, o, [kind]])
            command = f"ack {member} {now} " + ";".join(f"{a}:{b}:{','.join(map(str, t))}" for a, b, t in runs)
        elif action == "expire":
            now += rng.choice([100, 5_000, 20_000, 31_000])
            command = f"expire {now}"
        elif action == "leave":
            command = f"leave {member}"
        apply(state, command)
        answer = ask(command)
        rows.append([command, answer, hashlib.sha1(ask("state").encode()).hexdigest()[:12]])
    return rows


def main(argv: list[str]) -> int:
    libs = Path(argv[1]) if len(argv) > 1 else Path.home() / ".cache/raftka/kafka-4.4.0/libs"
    classpath = ":".join(str(p) for p in sorted(libs.glob("*.jar")))
    traces = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-cp", classpath, "-d", tmp, str(HERE / "SpDriver.java")], check=True)
        for limit, locks, seed in CONFIGS:
            java = subprocess.Popen(["java", "-cp", f"{classpath}:{tmp}", "kafka.server.share.SpDriver", str(locks),
                                     str(limit), str(LOCK_MS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, bufsize=1)

            def ask(command: str, java=java) -> str:
                java.stdin.write(command + "\n")
                java.stdin.flush()
                return java.stdout.readline().strip()

            rows = schedule(seed, limit, locks, ask)
            final = ask("state")
            java.stdin.close()
            java.wait()
            traces.append({"limit": limit, "locks": locks, "seed": seed, "steps": rows, "final_state": final})
    (HERE / "kafka_4_4.json").write_text(json.dumps({"kafka": libs.parent.name, "traces": traces}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
