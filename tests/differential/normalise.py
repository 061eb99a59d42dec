"""What legitimately differs between two clusters' answers to the same step, taken out.

`normalise` is the one place that decides it; everything it masks is listed here, with why:

| masked                                   | as            | why it differs legitimately             |
|------------------------------------------|---------------|-----------------------------------------|
| the cluster's own paths (log dirs, ...)  | <name>        | each cluster has its own temp dirs      |
| `127.0.0.1:<port>`, `localhost:<port>`   | <host:port>   | each cluster has its own free ports     |
| Kafka Uuids (22 chars base64url), UUIDs  | <uuid>        | cluster ids, topic ids, directory ids,  |
|                                          |               | member ids are random                   |
| epoch-millisecond and ISO/log4j times    | <time>        | wall clock                              |
| `N ms ago`                               | <N> ms ago    | wall clock                              |
| metadata-log positions: HighWatermark,   |               | each implementation writes its own      |
| LeaderEpoch, feature `Epoch`, the quorum | <n>           | number of metadata records              |
| table's LogEndOffset column              |               |                                         |
| JVM warnings (`OpenJDK ... warning`,     | dropped       | the JVM's, not the broker's             |
| `WARNING:`), Java stack frames           |               | (the client's code path, not the        |
| (`\tat ...`, `... N more`), log4j        |               | broker's answer)                        |
| WARN/INFO lines                          |               |                                         |
| runs of spaces and tabs                  | one space     | column widths follow the masked values  |
| the order of a listing's lines, for a    | sorted        | Kafka prints groups in hash-map order,  |
| step marked `unordered` (runner.py)      |               | which random group names reshuffle      |

Node ids are not masked: both clusters' single node is node 1. Ids that are a protocol
fact (producer ids, partition numbers, offsets of records the steps wrote) are not masked either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_NOISE = re.compile(
    r"^(OpenJDK 64-Bit Server VM warning:.*|WARNING: .*|\s+at [\w$.<>/]+\(.*\)"
    r"|\s*\.\.\. \d+ more|\[\d{4}-\d\d-\d\d [\d:,]+\] (WARN|INFO|DEBUG|TRACE) .*"
    r"|SLF4J: .*)$")
_ADDRESS = re.compile(r"\b(?:127\.0\.0\.1|localhost)(?:/127\.0\.0\.1)?:\d{2,5}\b")
_STD_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# A Kafka Uuid: 16 random bytes in base64url, 22 characters. Config names and words of that
# length have dots or no digits; a Uuid almost always mixes cases and digits.
_KAFKA_UUID = re.compile(r"(?<![\w.-])[A-Za-z0-9_-]{22}(?![\w.-])")
_LOG4J_TIME = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]")
_ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_EPOCH_MS = re.compile(r"\b1[5-9]\d{11}\b")
_MS_AGO = re.compile(r"\b\d+ ms ago\b")
_METADATA_POSITIONS = re.compile(r"\b(HighWatermark|LeaderEpoch|Epoch|LogEndOffset):(\s*)\d+\b")
# `kafka-metadata-quorum describe --replication` rows: NodeId DirectoryId LogEndOffset Lag ...
# (a static voter's DirectoryId is Kafka's zero Uuid, AAAAAAAAAAAAAAAAAAAAAA, kept as it is).
_QUORUM_ROW = re.compile(r"^(\d+\s+(?:<uuid>|[A-Za-z0-9_-]{22})\s+)\d+\b", re.MULTILINE)
_BLANKS = re.compile(r"[ \t]+")


_CAMEL_CASE_WORD = re.compile(r"[A-Za-z][a-z]+(?:[A-Z][a-z]+)*")  # LatestCoordinatorEpoch


def _mask_kafka_uuid(match: re.Match[str]) -> str:
    """A 22-character token is a Uuid if it mixes at least two of lower case, upper case and
    digits and is not a CamelCase word (a column name). Kafka's zero Uuid (22 A's, a static
    voter's directory id) is a constant and is kept."""
    token = match.group(0)
    mixed = sum((any(c.islower() for c in token), any(c.isupper() for c in token),
                 any(c.isdigit() for c in token)))
    return "<uuid>" if mixed >= 2 and not _CAMEL_CASE_WORD.fullmatch(token) else token


def normalise(text: str, replacements: Mapping[str, str] = {}) -> str:
    """`text` (a tool's stdout or stderr) with what legitimately differs masked (table above).

    `replacements` maps a cluster's own literal strings (its paths) to the names they share with
    the other cluster's, e.g. {"/tmp/x/kafka/data": "<log.dir>"}; longest first."""
    for literal in sorted(replacements, key=len, reverse=True):
        text = text.replace(literal, replacements[literal])
    lines = [line for line in text.splitlines() if not _NOISE.match(line)]
    text = "\n".join(lines)
    text = _ADDRESS.sub("<host:port>", text)
    text = _STD_UUID.sub("<uuid>", text)
    text = _KAFKA_UUID.sub(_mask_kafka_uuid, text)
    text = _LOG4J_TIME.sub("<time>", text)
    text = _ISO_TIME.sub("<time>", text)
    text = _EPOCH_MS.sub("<time>", text)
    text = _MS_AGO.sub("<N> ms ago", text)
    text = _METADATA_POSITIONS.sub(r"\1:\2<n>", text)
    text = _QUORUM_ROW.sub(r"\1<n>", text)
    lines = [_BLANKS.sub(" ", line).strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


_ERROR_WORDS = re.compile(r"error|exception|fail|not supported|unsupported|invalid", re.IGNORECASE)
_EXCEPTION = re.compile(r"\b[\w.]*(?:Exception|Error):")


def first_error_line(normalised_stderr: str) -> str:
    """The stderr line that says what went wrong, cut to 200 characters: the root cause (the
    last `Caused by:`), else the first line naming an exception (the tools' first line is often
    a generic "Error while executing config command with args ..."), else the first line
    naming an error, else the first line."""
    lines = [line for line in normalised_stderr.splitlines() if line]
    causes = [line for line in lines if line.startswith("Caused by:")]
    chosen = (causes[-1:] or [line for line in lines if _EXCEPTION.search(line)][:1]
              or [line for line in lines if _ERROR_WORDS.search(line)][:1] or lines[:1] or [""])[0]
    return chosen[:200]
