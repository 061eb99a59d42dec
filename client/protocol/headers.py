"""Request and response headers, and which header version an API version uses.

Request header v0: api_key int16, api_version int16, correlation_id int32;
v1 adds client_id (nullable string, ALWAYS the classic int16-length form, so
a broker can read the header of a request version it does not know); v2 adds
a tagged-field section. Response header v0: correlation_id int32; v1 adds a
tagged-field section. Flexible API versions use request v2 / response v1,
except ApiVersions, whose response header is always v0 (a client must be able
to read the reply before it knows which versions the broker speaks).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from raftka.client.protocol.api_keys import ApiKey, is_flexible
from raftka.client.protocol.codec import skip_tagged_fields
from raftka.client.protocol.exceptions import MalformedMessage, TruncatedMessage

_FIXED_REQUEST = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int


def _flexible(api_key: int, api_version: int) -> bool:
    try:
        return is_flexible(api_key, api_version)
    except (KeyError, ValueError):
        raise ValueError(
            f"api_key {api_key} is unknown; expected one of {[int(k) for k in ApiKey]}"
        ) from None


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1. Raises ValueError for an unknown api_key."""
    return 2 if _flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions responses always use 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def read_fixed_request_header(buf: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the part common to every header version."""
    if len(buf) < _FIXED_REQUEST.size:
        raise TruncatedMessage(
            f"request header needs {_FIXED_REQUEST.size} bytes but the frame has {len(buf)}"
        )
    return _FIXED_REQUEST.unpack_from(buf, 0)


def read_client_id(buf: memoryview, pos: int) -> tuple[str | None, int]:
    if pos + 2 > len(buf):
        raise TruncatedMessage(f"client_id length needs 2 bytes at offset {pos}; frame ended")
    (n,) = _INT16.unpack_from(buf, pos)
    pos += 2
    if n == -1:
        return None, pos
    if n < 0:
        raise MalformedMessage(f"client_id has negative length {n}; expected -1 or >= 0")
    if pos + n > len(buf):
        raise TruncatedMessage(
            f"client_id declares {n} bytes at offset {pos} but {len(buf) - pos} remain"
        )
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise MalformedMessage(f"client_id is not UTF-8: {exc}") from None


def decode_request_header(buf: memoryview, version: int) -> tuple[RequestHeader, int]:
    """Decode a request header of `version` (0, 1 or 2); returns (header, body offset)."""
    api_key, api_version, correlation_id = read_fixed_request_header(buf)
    pos = _FIXED_REQUEST.size
    client_id = None
    if version >= 1:
        client_id, pos = read_client_id(buf, pos)
    if version >= 2:
        pos = skip_tagged_fields(buf, pos, "request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(header: RequestHeader, version: int) -> bytes:
    out = _FIXED_REQUEST.pack(header.api_key, header.api_version, header.correlation_id)
    if version >= 1:
        if header.client_id is None:
            out += b"\xff\xff"
        else:
            raw = header.client_id.encode("utf-8")
            out += _INT16.pack(len(raw)) + raw
    if version >= 2:
        out += b"\x00"  # no tagged fields
    return out


def decode_response_header(buf: memoryview, version: int) -> tuple[ResponseHeader, int]:
    if len(buf) < 4:
        raise TruncatedMessage(f"response header needs 4 bytes but the frame has {len(buf)}")
    (correlation_id,) = _INT32.unpack_from(buf, 0)
    pos = 4
    if version >= 1:
        pos = skip_tagged_fields(buf, pos, "response header")
    return ResponseHeader(correlation_id), pos


def encode_response_header(correlation_id: int, version: int) -> bytes:
    return _INT32.pack(correlation_id) + (b"\x00" if version >= 1 else b"")
