"""Regenerate golden.json for tests/unit/test_share_state_wire.py: the share coordinator's state
APIs and `__share_group_state` records, encoded by Apache Kafka 4.4's own serializers
(KafkaShareStateEncode.java: the generated JsonConverters and ShareCoordinatorRecordSerde).

    python -m tests.unit.testdata.share_state_wire.generate [KAFKA_LIBS]   (from the repository root)

KAFKA_LIBS: a Kafka 4.4 distribution's libs/ (default ~/.cache/raftka/kafka-4.4.0/libs). Needs a
JDK (javac, java). The test itself never runs Java.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from raftka.broker.group.share_coordinator_state import SNAPSHOT, ShareRecord
from raftka.client.protocol.api_keys import DECLARED_VERSIONS
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_share_state_wire import RECORDS, STATE_APIS
from tests.unit.test_share_wire import MODES, message_for
from tests.unit.testdata.share_wire.generate import kafka_json

HERE = Path(__file__).resolve().parent


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # no spaces: the line splits on them


def record_line(record: ShareRecord) -> str:
    kind = "Snapshot" if record.kind == SNAPSHOT else "Update"
    key = {"groupId": record.key.group_id, "topicId": kafka_json(record.key.topic_id),
           "partition": record.key.partition}
    v = record.value
    if v is None:
        return f"record Share{kind}Key - {_compact(key)} -"
    value = {"snapshotEpoch": v.snapshot_epoch, "leaderEpoch": v.leader_epoch, "startOffset": v.start_offset,
             "deliveryCompleteCount": v.delivery_complete_count,
             "stateBatches": [{"firstOffset": b.first_offset, "lastOffset": b.last_offset,
                               "deliveryState": b.delivery_state, "deliveryCount": b.delivery_count}
                              for b in v.batches]}
    if record.kind == SNAPSHOT:
        value.update(stateEpoch=v.state_epoch, createTimestamp=v.create_timestamp, writeTimestamp=v.write_timestamp)
    return (f"record Share{kind}Key Share{kind}Value {_compact(key)} "
            f"{_compact(value)}")


def main(argv: list[str]) -> int:
    libs = Path(argv[1]) if len(argv) > 1 else Path.home() / ".cache/raftka/kafka-4.4.0/libs"
    classpath = ":".join(str(p) for p in sorted(libs.glob("*.jar")))
    rows, lines = [], []
    for key in STATE_APIS:
        for kind, codecs in (("request", REQUEST_CODECS), ("response", RESPONSE_CODECS)):
            low, high = DECLARED_VERSIONS[key]
            for version in range(low, high + 1):
                for mode in MODES:
                    codec = codecs[key]
                    message = message_for(codec, version, mode)
                    lines.append(f"message {codec.schema.name} {version} "
                                 f"{json.dumps(kafka_json(message), ensure_ascii=False)}")
                    rows.append({"api": key.name, "kind": kind, "version": version, "mode": mode})
    names = sorted(RECORDS)
    lines += [record_line(RECORDS[name]) for name in names]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-cp", classpath, "-d", tmp, str(HERE / "KafkaShareStateEncode.java")], check=True)
        result = subprocess.run(["java", "-cp", f"{classpath}:{tmp}", "KafkaShareStateEncode"],
                             input="\n".join(lines) + "\n", capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"KafkaShareStateEncode failed:\n{result.stderr[-3000:]}")
    out = result.stdout.split()
    assert len(out) == len(rows) + len(names), (len(out), len(rows), len(names))
    for row, hex_ in zip(rows, out, strict=False):
        row["hex"] = hex_
    golden = {"kafka": libs.parent.name, "cases": rows, "records": dict(zip(names, out[len(rows):], strict=True))}
    (HERE / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
