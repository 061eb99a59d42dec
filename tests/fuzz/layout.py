"""Where the length prefixes, varints, integers and record batches of a valid request are.

`request_layout(payload)` walks a request frame payload (without its 4-byte size
prefix) with the same schemas the codec uses (client/protocol/schemas.py) and
returns one `Span` per interesting field, so a mutation can lie about one
exact length, overflow one exact varint or hit one integer with a boundary
value, instead of flipping bits blindly. It reads only valid requests (the
fuzzer's corpus) and says so loudly if it cannot.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from raftka.client.protocol.headers import request_header_version
from raftka.client.protocol.messages import REQUEST_CODECS
from raftka.client.protocol.schema import Field, parse_versions

_FIXED = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
          "float64": 8, "bool": 1, "uuid": 16}


@dataclass(frozen=True, slots=True)
class Span:
    """One field's bytes: `kind` is len16 / len32 / ulen (compact, unsigned varint n+1),
    varint / varlong / uvarint, int8 / int16 / int32 / int64, or records (the batch bytes)."""

    kind: str
    offset: int
    width: int
    value: int = 0  # a length's value (-1 for null), an integer's value


class _Walker:
    def __init__(self, buf: bytes, version: int, flexible: bool) -> None:
        self.buf = buf
        self.version = version
        self.flexible = flexible
        self.spans: list[Span] = []

    def _uvarint(self, pos: int) -> tuple[int, int]:
        value = shift = 0
        start = pos
        while True:
            byte = self.buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, pos
            shift += 7
            if pos - start > 10:
                raise ValueError(f"varint at {start} is too long")

    def _length(self, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
        if compact:
            raw, end = self._uvarint(pos)
            self.spans.append(Span("ulen", pos, end - pos, raw - 1))
            return raw - 1, end
        fmt = ">i" if wide else ">h"
        (value,) = struct.unpack_from(fmt, self.buf, pos)
        width = struct.calcsize(fmt)
        self.spans.append(Span("len32" if wide else "len16", pos, width, value))
        return value, pos + width

    def _compact(self, field: Field) -> bool:
        if field.flexible is not None:
            return self.version in parse_versions(field.flexible)
        return self.flexible

    def tagged(self, pos: int) -> int:
        count, pos = self._uvarint(pos)
        for _ in range(count):
            _, pos = self._uvarint(pos)  # tag
            size, after = self._uvarint(pos)
            self.spans.append(Span("ulen", pos, after - pos, size - 1))
            pos = after + size
        return pos

    def struct(self, fields: tuple[Field, ...], pos: int) -> int:
        for field in fields:
            if self.version not in parse_versions(field.versions):
                continue
            if field.tag is not None and self.version in parse_versions(field.tagged):
                continue  # tagged fields travel in the tagged section
            pos = self.field(field, pos)
        if self.flexible:
            pos = self.tagged(pos)
        return pos

    def field(self, field: Field, pos: int) -> int:
        compact = self._compact(field)
        if field.is_array:
            count, pos = self._length(pos, compact, wide=True)
            for _ in range(max(count, 0)):
                pos = self.value(field, field.element_type, pos)
            return pos
        if field.is_struct and self.version in parse_versions(field.nullable):
            marker = self.buf[pos]
            self.spans.append(Span("int8", pos, 1, marker))
            pos += 1
            if marker & 0x80:
                return pos
        return self.value(field, field.type, pos)

    def value(self, field: Field, type_name: str, pos: int) -> int:
        compact = self._compact(field)
        if type_name in _FIXED:
            width = _FIXED[type_name]
            if type_name in ("int8", "int16", "int32", "int64"):
                value = int.from_bytes(self.buf[pos:pos + width], "big", signed=True)
                self.spans.append(Span(type_name, pos, width, value))
            return pos + width
        if type_name in ("varint", "varlong"):
            raw, end = self._uvarint(pos)
            self.spans.append(Span(type_name, pos, end - pos, (raw >> 1) ^ -(raw & 1)))
            return end
        if type_name == "string":
            n, pos = self._length(pos, compact, wide=False)
            return pos + max(n, 0)
        if type_name in ("bytes", "records"):
            n, pos = self._length(pos, compact, wide=True)
            if type_name == "records" and n > 0:
                self.spans.append(Span("records", pos, n))
            return pos + max(n, 0)
        return self.struct(field.fields, pos)


def request_layout(payload: bytes) -> list[Span]:
    """Spans of a valid request payload (header and body), in order. Raises ValueError if the
    walk does not end exactly at the end of the payload (not a valid request)."""
    api_key, version = struct.unpack_from(">hh", payload, 0)
    codec = REQUEST_CODECS[api_key]
    header_version = request_header_version(api_key, version)
    walker = _Walker(payload, version, codec.schema.is_flexible(version))
    walker.spans.append(Span("int16", 0, 2, api_key))
    walker.spans.append(Span("int16", 2, 2, version))
    walker.spans.append(Span("int32", 4, 4, struct.unpack_from(">i", payload, 4)[0]))
    client_id_length, pos = walker._length(8, compact=False, wide=False)  # always classic
    pos += max(client_id_length, 0)
    if header_version >= 2:
        pos = walker.tagged(pos)
    try:
        end = walker.struct(codec.schema.fields, pos)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"api {api_key} v{version}: the walk ran off the payload ({exc})") from None
    if end != len(payload):
        raise ValueError(f"api {api_key} v{version}: the walk ended at {end} of {len(payload)} bytes")
    return walker.spans
