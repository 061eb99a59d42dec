"""Whole requests and responses: header + body, framed.

The broker's side: `decode_request(frame)` and `encode_response(...)`.
The SDK's side: `encode_request(...)` and `decode_response(...)`.
`frame` is always a payload WITHOUT its 4-byte size prefix (what
FrameDecoder.feed returns); the encode_* functions return bytes WITH the prefix,
ready to send (so a big Fetch response is joined exactly once).
"""

from __future__ import annotations

import struct
from typing import Any

from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS, ApiKey
from raftka.client.protocol.codec import Buffer, Message, MessageCodec
from raftka.client.protocol.errors import ErrorCode
from raftka.client.protocol.exceptions import MalformedMessage, UnknownApi, UnsupportedVersion
from raftka.client.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    read_client_id,
    read_fixed_request_header,
    request_header_version,
    response_header_version,
)
from raftka.client.protocol.schemas import ALL_SCHEMAS

_SIZE = struct.Struct(">i")

REQUEST_CODECS: dict[ApiKey, MessageCodec] = {}
RESPONSE_CODECS: dict[ApiKey, MessageCodec] = {}
for _schema in ALL_SCHEMAS:
    _codecs = REQUEST_CODECS if _schema.kind == "request" else RESPONSE_CODECS
    _codecs[ApiKey(_schema.api_key)] = MessageCodec(_schema)

# Message classes by name, e.g. MESSAGE_CLASSES["ProduceRequest"].
MESSAGE_CLASSES: dict[str, type[Message]] = {
    c.cls.__name__: c.cls for c in (*REQUEST_CODECS.values(), *RESPONSE_CODECS.values())
}


def request_class(api_key: int) -> type[Message]:
    """The request message class for `api_key` (raises KeyError if unknown)."""
    return REQUEST_CODECS[ApiKey(api_key)].cls


def response_class(api_key: int) -> type[Message]:
    """The response message class for `api_key` (raises KeyError if unknown)."""
    return RESPONSE_CODECS[ApiKey(api_key)].cls


def _memoryview(frame: Buffer) -> memoryview:
    view = frame if type(frame) is memoryview else memoryview(frame)
    return view if view.format == "B" else view.cast("B")


def _frame(chunks: list[bytes]) -> bytes:
    """chunks[0] is a placeholder for the size prefix."""
    chunks[0] = _SIZE.pack(sum(map(len, chunks)))
    return b"".join(chunks)


# Trailing bytes tolerated after a request body, per (API, first version): a known client
# quirk that Kafka (which never checks for trailing bytes) accepts. librdkafka 2.x asks
# Metadata v9+ for "all topics" by leaving its 4-byte array-count placeholder as zeros:
# the first byte reads as a null compact array, and 3 zero/flag bytes are left over.
# librdkafka's AlterUserScramCredentials writes the body's empty tagged-field section
# itself and then again when it finalizes the flexible request: one zero byte is left over.
TOLERATED_TRAILING_BYTES: dict[tuple[ApiKey, int], int] = {
    (ApiKey.METADATA, 9): 3,
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0): 1,
}


def _tolerated_trailing(key: ApiKey, api_version: int) -> int:
    return max((n for (k, first), n in TOLERATED_TRAILING_BYTES.items()
                if k == key and api_version >= first), default=0)


def _check_consumed(what: str, end: int, buf: memoryview, tolerated: int = 0) -> None:
    if not (0 <= len(buf) - end <= tolerated):
        raise MalformedMessage(
            f"{what}: {len(buf) - end} unexpected byte(s) after the body "
            f"(body ended at offset {end} of {len(buf)})"
        )


def peek_request_header(frame: Buffer) -> RequestHeader:
    """Read a request's api_key, api_version, correlation_id and client_id without
    looking at the body. Works for any api_key/version (the client_id is always
    a classic string). Raises ProtocolError if the frame is too short."""
    buf = _memoryview(frame)
    api_key, api_version, correlation_id = read_fixed_request_header(buf)
    client_id, _ = read_client_id(buf, 8)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def decode_request(frame: Buffer) -> tuple[RequestHeader, Message]:
    """Decode one request frame (payload without size prefix) into (header, body).

    Raises UnknownApi / UnsupportedVersion (both carrying `.header`) for an
    api_key or version outside the declared ranges, before parsing the body;
    any other ProtocolError for malformed or truncated bytes. The broker
    checks `needs_api_versions_fallback(header)` first: an ApiVersions request
    above the advertised maximum is answered, never parsed.
    """
    buf = _memoryview(frame)
    api_key, api_version, correlation_id = read_fixed_request_header(buf)
    try:
        key = ApiKey(api_key)
    except ValueError:
        header = _best_effort_header(buf, api_key, api_version, correlation_id)
        raise UnknownApi(
            f"api_key {api_key} is not supported; expected one of {[int(k) for k in ApiKey]}",
            header,
        ) from None
    codec = REQUEST_CODECS[key]
    if api_version not in codec.versions:
        header = _best_effort_header(buf, api_key, api_version, correlation_id)
        raise UnsupportedVersion(
            f"{key.name} version {api_version} is not supported; expected "
            f"{codec.versions.low}..{codec.versions.high}",
            header,
        )
    header, pos = decode_request_header(buf, request_header_version(api_key, api_version))
    body, end = codec.decode(buf, api_version, pos)
    _check_consumed(f"{key.name} v{api_version} request", end, buf, _tolerated_trailing(key, api_version))
    return header, body


def _best_effort_header(
    buf: memoryview, api_key: int, api_version: int, correlation_id: int
) -> RequestHeader:
    try:
        client_id, _ = read_client_id(buf, 8)
    except Exception:  # noqa: BLE001 - the header is only context for an error
        client_id = None
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Any,
    client_id: str | None = None,
) -> bytes:
    """Encode a request (header + body) as a size-prefixed frame.

    `body` is the request's message object or a dict of its fields.
    Raises EncodeError naming the field for a value that does not fit.
    """
    key = ApiKey(api_key)
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    chunks: list[Any] = [b"", encode_request_header(header, request_header_version(key, api_version))]
    REQUEST_CODECS[key].encode_into(body, api_version, chunks)
    return _frame(chunks)


def encode_response(
    header_or_correlation: RequestHeader | int,
    api_key: int,
    api_version: int,
    body: Any,
) -> bytes:
    """Encode a response (header + body) as a size-prefixed frame.

    Pass the request's header (or just its correlation id). `body` is the
    response message object or a dict; missing fields take their defaults.
    """
    return b"".join(encode_response_chunks(header_or_correlation, api_key, api_version, body))


def encode_response_chunks(
    header_or_correlation: RequestHeader | int,
    api_key: int,
    api_version: int,
    body: Any,
) -> list[Any]:
    """`encode_response`, unjoined: the size prefix, then the encoded pieces in order.

    A `records` value may be any object with `len()` (e.g. a file region the
    transport sends with sendfile): it is passed through untouched, so a Fetch
    response never has to copy its record bytes into one buffer.
    """
    correlation_id = (
        header_or_correlation.correlation_id
        if isinstance(header_or_correlation, RequestHeader)
        else header_or_correlation
    )
    key = ApiKey(api_key)
    chunks: list[Any] = [
        b"",
        encode_response_header(correlation_id, response_header_version(key, api_version)),
    ]
    RESPONSE_CODECS[key].encode_into(body, api_version, chunks)
    chunks[0] = _SIZE.pack(sum(map(len, chunks)))
    return chunks


def peek_correlation_id(frame: Buffer) -> int:
    """The correlation id of a response frame (every response header starts with it)."""
    buf = _memoryview(frame)
    header, _ = decode_response_header(buf, 0)
    return header.correlation_id


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[ResponseHeader, Message]:
    """Decode a response frame (payload without size prefix) to a request the
    caller sent as (api_key, api_version). An ApiVersions response carrying
    UNSUPPORTED_VERSION is decoded in the v0 layout, as brokers send it."""
    key = ApiKey(api_key)
    codec = RESPONSE_CODECS[key]
    buf = _memoryview(frame)
    header, pos = decode_response_header(buf, response_header_version(key, api_version))
    version = api_version
    if (
        key == ApiKey.API_VERSIONS
        and len(buf) >= pos + 2
        and struct.unpack_from(">h", buf, pos)[0] == ErrorCode.UNSUPPORTED_VERSION
    ):
        version = 0
    body, end = codec.decode(buf, version, pos)
    _check_consumed(f"{key.name} v{api_version} response", end, buf)
    return header, body


def needs_api_versions_fallback(header: RequestHeader) -> bool:
    """True for an ApiVersions request above the advertised maximum: answer it
    with `api_versions_fallback_response` and do not parse its body."""
    return (
        header.api_key == ApiKey.API_VERSIONS
        and header.api_version > ADVERTISED_VERSIONS[ApiKey.API_VERSIONS][1]
    )


def api_versions_fallback_response(correlation_id: int) -> bytes:
    """The size-prefixed ApiVersions v0-layout reply to a too-new ApiVersions
    request: response header v0, error_code 35 (UNSUPPORTED_VERSION), and one
    api_keys entry with ApiVersions' own advertised range (KIP-511). No throttle
    field: clients parse it as v0 whatever version they asked for."""
    low, high = ADVERTISED_VERSIONS[ApiKey.API_VERSIONS]
    payload = struct.pack(
        ">ihihhh",
        correlation_id,
        ErrorCode.UNSUPPORTED_VERSION,
        1,  # api_keys array length
        ApiKey.API_VERSIONS,
        low,
        high,
    )
    return _SIZE.pack(len(payload)) + payload


def expects_response(header: RequestHeader, body: Message) -> bool:
    """False only for Produce with acks=0, which Kafka never answers."""
    return not (header.api_key == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0)
