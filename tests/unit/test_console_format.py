"""raftka/cli/console_format.py: kafka-console-producer/consumer's line formats, table-driven."""

from __future__ import annotations

import json

import pytest

from raftka.cli.console_format import (
    CONSUMER_PROPERTIES,
    PRODUCER_PROPERTIES,
    LineError,
    LineReader,
    RecordFormatter,
    parse_properties,
    record_json,
)
from raftka.client.records import ConsumerRecord


@pytest.mark.parametrize(("props", "line", "expected"), [
    ({}, b"a\tb", (None, b"a\tb", [])),
    ({"parse.key": "true"}, b"k\tv\tw", (b"k", b"v\tw", [])),
    ({"parse.key": "true", "key.separator": ":"}, b"k:v", (b"k", b"v", [])),
    ({"parse.key": "true", "null.marker": "NULL"}, b"NULL\tv", (None, b"v", [])),
    ({"null.marker": "NULL"}, b"NULL", (None, None, [])),
    ({"parse.headers": "true"}, b"h1:v1,h2\tvalue", (None, b"value", [("h1", b"v1"), ("h2", None)])),
    ({"parse.headers": "true", "parse.key": "true"}, b"h:1\tk\tv", (b"k", b"v", [("h", b"1")])),
    ({"parse.headers": "true", "headers.delimiter": "|", "headers.separator": ";",
      "headers.key.separator": "="}, b"a=1;b=2|v", (None, b"v", [("a", b"1"), ("b", b"2")])),
    ({"parse.key": "true", "ignore.error": "true"}, b"no-separator", (None, b"no-separator", [])),
])
def test_line_reader(props, line, expected) -> None:
    assert LineReader.from_properties(props).parse(line) == expected


@pytest.mark.parametrize(("props", "line", "message"), [
    ({"parse.key": "true"}, b"no-separator", "no key separator"),
    ({"parse.headers": "true"}, b"no-delimiter", "no headers delimiter"),
])
def test_line_reader_refuses(props, line, message) -> None:
    with pytest.raises(LineError, match=message):
        LineReader.from_properties(props).parse(line)


RECORD = ConsumerRecord("t", 2, 7, 1700000000000, 0, b"k", b"v", (("h1", b"x"), ("h2", None)))


@pytest.mark.parametrize(("props", "expected"), [
    ({}, b"v\n"),
    ({"print.key": "true"}, b"k\tv\n"),
    ({"print.key": "true", "key.separator": "|"}, b"k|v\n"),
    ({"print.timestamp": "true", "print.partition": "true", "print.offset": "true",
      "print.headers": "true", "print.key": "true"},
     b"CreateTime:1700000000000\tPartition:2\tOffset:7\th1:x,h2:null\tk\tv\n"),
    ({"print.headers": "true", "print.value": "false"}, b"h1:x,h2:null\n"),
    ({"print.key": "true", "line.separator": "\r\n"}, b"k\tv\r\n"),
])
def test_record_formatter(props, expected) -> None:
    assert RecordFormatter.from_properties(props).format(RECORD) == expected


def test_record_formatter_nulls_and_no_headers() -> None:
    record = RECORD._replace(key=None, value=None, headers=())
    fmt = RecordFormatter.from_properties({"print.key": "true", "print.headers": "true",
                                           "null.literal": "<nil>"})
    assert fmt.format(record) == b"NO_HEADERS\t<nil>\t<nil>\n"


def test_record_json() -> None:
    got = json.loads(record_json(RECORD._replace(value=b"\xff\x00")))
    assert got == {"topic": "t", "partition": 2, "offset": 7, "timestamp": 1700000000000,
                   "timestamp_type": "CreateTime", "key": "k", "value": "base64:/wA=",
                   "headers": [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}]}


@pytest.mark.parametrize(("pairs", "known", "message"), [
    (["print.key"], CONSUMER_PROPERTIES, "is not key=value"),
    (["print.kye=true"], CONSUMER_PROPERTIES, "'print.kye' is not known"),
    (["parse.kye=true"], PRODUCER_PROPERTIES, "expected one of: parse.key"),
])
def test_parse_properties_refuses(pairs, known, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_properties(pairs, known)


def test_a_flag_must_be_true_or_false() -> None:
    with pytest.raises(ValueError, match="must be true or false"):
        RecordFormatter.from_properties({"print.key": "yes"})
