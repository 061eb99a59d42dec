"""Kafka framing, sans-IO: every request and response is a 4-byte big-endian
size followed by that many bytes.

`FrameDecoder` is fed whatever the socket returned and hands back complete
frame payloads (without the size prefix). It refuses an oversize frame as soon
as its size prefix arrives, before buffering any of it.
"""

from __future__ import annotations

import struct

from raftka.client.protocol.exceptions import FrameTooLarge, ProtocolError, TruncatedMessage

_SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its 4-byte big-endian size."""
    return _SIZE.pack(len(memoryview(payload).cast("B"))) + bytes(payload)


class FrameDecoder:
    """Split a byte stream into frames.

    >>> decoder = FrameDecoder(max_frame_size=1024)
    >>> decoder.feed(b"\\x00\\x00\\x00\\x02hi\\x00")
    [b'hi']

    After a ProtocolError the decoder is poisoned: the stream position is lost,
    so every later `feed` raises too and the connection must be closed.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._prefix = bytearray()  # the next size prefix, while it is incomplete
        self._need: int | None = None  # payload size of the frame in progress
        self._parts: list[bytes] = []  # received pieces of the frame in progress
        self._have = 0  # bytes in _parts
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._prefix) + self._have

    @property
    def frame_size(self) -> int | None:
        """Payload size of the frame in progress once its size prefix has arrived, else None."""
        return self._need

    @property
    def missing(self) -> int:
        """Bytes still to receive to complete the frame in progress or, before its size
        prefix has arrived, the prefix. A reader that receives at most `missing + 4`
        bytes at a time never holds more than one frame and the next prefix."""
        if self._need is None:
            return 4 - len(self._prefix)
        return self._need - self._have

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; return every frame they complete (possibly none).

        A frame spread over several feeds is kept as the pieces received and joined once
        when complete (one copy, no regrowing buffer); a frame inside one feed is one slice."""
        if self._error is not None:
            raise self._error
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        frames: list[bytes] = []
        pos, end = 0, len(view)
        while pos < end or self._need == 0:
            if self._need is None:
                if not self._prefix and end - pos >= 4:
                    (size,) = _SIZE.unpack_from(view, pos)
                    pos += 4
                else:
                    take = min(4 - len(self._prefix), end - pos)
                    self._prefix += view[pos : pos + take]
                    pos += take
                    if len(self._prefix) < 4:
                        break
                    (size,) = _SIZE.unpack(self._prefix)
                    self._prefix.clear()
                if size < 0 or size > self.max_frame_size:
                    self._error = FrameTooLarge(
                        f"frame size prefix is {size} bytes; expected 0..{self.max_frame_size}"
                    )
                    self._parts, self._have = [], 0
                    raise self._error
                self._need = size
            take = min(self._need - self._have, end - pos)
            if take == self._need:  # the whole frame is in this feed
                frames.append(bytes(view[pos : pos + take]))
            else:
                if take:
                    whole = pos == 0 and take == end and type(data) is bytes
                    self._parts.append(data if whole else bytes(view[pos : pos + take]))  # type: ignore[arg-type]
                    self._have += take
                if self._have < self._need:
                    pos += take
                    break
                frames.append(b"".join(self._parts))
                self._parts, self._have = [], 0
            pos += take
            self._need = None
        return frames

    def eof(self) -> None:
        """Call when the peer closed; raises TruncatedMessage if a frame was cut short."""
        if self._need is not None or self._prefix:
            raise TruncatedMessage(
                f"connection closed inside a frame: {self.buffered} byte(s) of "
                f"{'an unknown size' if self._need is None else self._need} received"
            )
