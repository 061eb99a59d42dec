"""Exceptions raised by the wire codec.

Every problem with bytes received from the network raises a `ProtocolError`
subclass, never IndexError, struct.error, UnicodeDecodeError or MemoryError:
the broker catches ProtocolError, logs why, and answers or closes the
connection. `EncodeError` is the exception for a message *we* built wrongly
(a value out of range for its type, a null in a non-nullable field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftka.client.protocol.headers import RequestHeader


class ProtocolError(Exception):
    """Bytes on the wire violate the Kafka protocol."""


class TruncatedMessage(ProtocolError):
    """The input ended (or a declared length ran) past the end of the frame."""


class MalformedMessage(ProtocolError):
    """The input is complete but invalid: bad length, bad UTF-8, bad varint,
    a null where the version forbids one, or bytes left over after the body."""


class FrameTooLarge(ProtocolError):
    """A frame's size prefix exceeds the configured maximum (or is negative)."""


class UnknownApi(ProtocolError):
    """A request names an api_key this codec does not declare.

    `header` carries what could be read (api_key, api_version,
    correlation_id, client_id) so the broker can log it and close.
    """

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class UnsupportedVersion(ProtocolError):
    """A request's api_version is outside the declared range for its api_key.

    The body was not parsed. `header` lets the broker answer
    UNSUPPORTED_VERSION (35) with the right correlation id, or, for
    ApiVersions, send `api_versions_fallback_response`.
    """

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class EncodeError(ValueError):
    """A message could not be encoded: `path` names the offending field."""

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        self.path = path
        self.reason = message
        where = ".".join(path)
        super().__init__(f"{where}: {message}" if where else message)
