"""Regenerate golden.json: the share-group messages of tests/unit/test_share_wire.py, encoded
by Apache Kafka 4.4's own serializers (KafkaEncode.java through the generated JsonConverters).

    python -m tests.unit.testdata.share_wire.generate [KAFKA_LIBS]   (from the repository root)

KAFKA_LIBS: a Kafka 4.4 distribution's libs/ (default ~/.cache/raftka/kafka-4.4.0/libs, where the
differential suite keeps it). Needs a JDK (javac, java). The test itself never runs Java.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from raftka.client.protocol.api_keys import DECLARED_VERSIONS, ApiKey
from raftka.client.protocol.codec import Message
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_share_wire import MODES, message_for

HERE = Path(__file__).resolve().parent
SHARE_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE)


def cases():
    for key in SHARE_APIS:
        for kind, codecs in (("request", REQUEST_CODECS), ("response", RESPONSE_CODECS)):
            low, high = DECLARED_VERSIONS[key]
            for version in range(low, high + 1):
                for mode in MODES:
                    yield key, kind, version, mode, codecs[key]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def kafka_json(value):
    """raftka's message values in the JSON Kafka's JsonConverters read."""
    if isinstance(value, Message):
        return {camel(k): kafka_json(v) for k, v in value.to_dict().items()}
    if isinstance(value, dict):
        return {camel(k): kafka_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [kafka_json(v) for v in value]
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")  # Kafka's Uuid.toString
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    return value


def main(argv: list[str]) -> int:
    libs = Path(argv[1]) if len(argv) > 1 else Path.home() / ".cache/raftka/kafka-4.4.0/libs"
    classpath = ":".join(str(p) for p in sorted(libs.glob("*.jar")))
    rows, lines = [], []
    for key, kind, version, mode, codec in cases():
        message = message_for(codec, version, mode)
        name = codec.schema.name  # e.g. ShareFetchRequest
        lines.append(f"{name} {version} {json.dumps(kafka_json(message), ensure_ascii=False)}")
        rows.append({"api": key.name, "kind": kind, "version": version, "mode": mode})
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-cp", classpath, "-d", tmp, str(HERE / "KafkaEncode.java")], check=True)
        out = subprocess.run(["java", "-cp", f"{classpath}:{tmp}", "KafkaEncode"], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, check=True).stdout.split()
    assert len(out) == len(rows), (len(out), len(rows))
    for row, hex_ in zip(rows, out, strict=True):
        row["hex"] = hex_
    (HERE / "golden.json").write_text(json.dumps({"kafka": libs.parent.name, "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
