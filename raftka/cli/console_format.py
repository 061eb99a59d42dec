"""The console tools' line formats, as kafka-console-producer/consumer define them (pure).

Producer (`--property`, Kafka's LineMessageReader): `parse.key` (false),
`key.separator` (TAB), `parse.headers` (false), `headers.delimiter` (TAB),
`headers.separator` (`,`), `headers.key.separator` (`:`), `null.marker`
(none), `ignore.error` (false). A line is
`[headers<headers.delimiter>][key<key.separator>]value`, headers being
`k1:v1,k2:v2` (a header without `:` has a null value).

Consumer (`--property`, Kafka's DefaultMessageFormatter): `print.timestamp`,
`print.partition`, `print.offset`, `print.delivery` (a share consumer's delivery
count), `print.headers`, `print.key` (false),
`print.value` (true), `key.separator` (TAB), `line.separator` (newline),
`headers.separator` (`,`), `null.literal` (`null`). Fields come in Kafka's
order: timestamp, partition, offset, delivery, headers, key, value.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from raftka.client.records import ConsumerRecord, ShareConsumerRecord

PRODUCER_PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter",
                       "headers.separator", "headers.key.separator", "null.marker", "ignore.error")
CONSUMER_PROPERTIES = ("print.timestamp", "print.partition", "print.offset", "print.delivery", "print.headers",
                       "print.key", "print.value", "key.separator", "line.separator",
                       "headers.separator", "null.literal")


class LineError(ValueError):
    """A producer input line that does not have the shape the properties ask for."""


def parse_properties(pairs: Sequence[str], known: Sequence[str]) -> dict[str, str]:
    """`--property key=value` pairs; a key this tool does not know is refused, naming the known."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--property {pair!r} is not key=value (e.g. {known[0]}=true)")
        if key not in known:
            raise ValueError(f"--property {key!r} is not known; expected one of: {', '.join(known)}")
        out[key] = value
    return out


def _flag(props: dict[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"--property {key}={value!r} must be true or false")
    return value.strip().lower() == "true"


def _separator(props: dict[str, str], key: str, default: str) -> bytes:
    value = props.get(key, default)
    if not value:
        raise ValueError(f"--property {key} must not be empty")
    return value.encode()


@dataclass(frozen=True)
class LineReader:
    """How the console producer splits one input line into (key, value, headers)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        marker = props.get("null.marker")
        return cls(
            parse_key=_flag(props, "parse.key", False),
            key_separator=_separator(props, "key.separator", "\t"),
            parse_headers=_flag(props, "parse.headers", False),
            headers_delimiter=_separator(props, "headers.delimiter", "\t"),
            headers_separator=_separator(props, "headers.separator", ","),
            headers_key_separator=_separator(props, "headers.key.separator", ":"),
            null_marker=marker.encode() if marker else None,
            ignore_error=_flag(props, "ignore.error", False))

    @property
    def plain(self) -> bool:
        """Every line is just a value (the fast path)."""
        return not (self.parse_key or self.parse_headers or self.null_marker is not None)

    def _null(self, field: bytes) -> bytes | None:
        return None if self.null_marker is not None and field == self.null_marker else field

    def parse(self, line: bytes) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line (without its line ending); LineError if malformed."""
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            text, sep, after = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise LineError(f"no headers delimiter {self.headers_delimiter.decode()!r}")
            else:
                rest = after
                if self._null(text) is not None and text:
                    for item in text.split(self.headers_separator):
                        name, ksep, value = item.partition(self.headers_key_separator)
                        headers.append((name.decode("utf-8", "replace"),
                                        self._null(value) if ksep else None))
        key: bytes | None = None
        if self.parse_key:
            k, sep, after = rest.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise LineError(f"no key separator {self.key_separator.decode()!r}")
            else:
                key, rest = self._null(k), after
        return key, self._null(rest), headers


@dataclass(frozen=True)
class RecordFormatter:
    """How the console consumer prints one record (Kafka's DefaultMessageFormatter)."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_delivery: bool = False  # a share consumer's delivery count ("Delivery:N")
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormatter:
        return cls(
            print_timestamp=_flag(props, "print.timestamp", False),
            print_partition=_flag(props, "print.partition", False),
            print_offset=_flag(props, "print.offset", False),
            print_delivery=_flag(props, "print.delivery", False),
            print_headers=_flag(props, "print.headers", False),
            print_key=_flag(props, "print.key", False),
            print_value=_flag(props, "print.value", True),
            key_separator=props.get("key.separator", "\t").encode(),
            line_separator=props.get("line.separator", "\n").encode(),
            headers_separator=props.get("headers.separator", ",").encode(),
            null_literal=props.get("null.literal", "null").encode())

    def format(self, record: ConsumerRecord | ShareConsumerRecord) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            if record.timestamp < 0:
                parts.append(b"NO_TIMESTAMP")
            else:
                kind = "CreateTime" if record.timestamp_type == 0 else "LogAppendTime"
                parts.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            parts.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            parts.append(f"Offset:{record.offset}".encode())
        if self.print_delivery:  # NOT_PRESENT outside a share group, as Kafka's formatter prints
            count = getattr(record, "delivery_count", None)
            parts.append(b"Delivery:NOT_PRESENT" if count is None else f"Delivery:{count}".encode())
        if self.print_headers:
            parts.append(self.headers_separator.join(
                k.encode() + b":" + (self.null_literal if v is None else v)
                for k, v in record.headers) if record.headers else b"NO_HEADERS")
        if self.print_key:
            parts.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            parts.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(parts) + self.line_separator


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def record_json(record: ConsumerRecord | ShareConsumerRecord) -> bytes:
    """One record as a JSON line, with rpk's field names. Keys, values and header values are
    UTF-8 text, or `base64:...` when they are not valid UTF-8. A share consumer's record also
    has its `delivery_count`."""
    fields = {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "CreateTime" if record.timestamp_type == 0 else "LogAppendTime",
        "key": _text(record.key), "value": _text(record.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers],
    }
    if isinstance(record, ShareConsumerRecord):
        fields["delivery_count"] = record.delivery_count
    return json.dumps(fields, ensure_ascii=False).encode() + b"\n"
