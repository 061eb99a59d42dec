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
        self._buffer = bytearray()
        self._start = 0  # consumed prefix of _buffer, compacted lazily
        self._need: int | None = None  # payload size of the frame in progress
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer) - self._start

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
            return max(0, 4 - self.buffered)
        return self._need - self.buffered

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; return every frame they complete (possibly none)."""
        if self._error is not None:
            raise self._error
        self._buffer += data
        frames: list[bytes] = []
        buf = self._buffer
        while True:
            available = len(buf) - self._start
            if self._need is None:
                if available < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, self._start)
                if size < 0 or size > self.max_frame_size:
                    self._error = FrameTooLarge(
                        f"frame size prefix is {size} bytes; expected 0..{self.max_frame_size}"
                    )
                    self._buffer = bytearray()
                    self._start = 0
                    raise self._error
                self._need = size
                self._start += 4
                available -= 4
            if available < self._need:
                break
            end = self._start + self._need
            with memoryview(buf) as view:  # one copy out (a bytearray slice would be two)
                frames.append(bytes(view[self._start : end]))
            self._start = end
            self._need = None
        if self._start:
            # Compact once per feed: amortised O(bytes received).
            del buf[: self._start]
            self._start = 0
        return frames

    def eof(self) -> None:
        """Call when the peer closed; raises TruncatedMessage if a frame was cut short."""
        if self._need is not None or self.buffered:
            raise TruncatedMessage(
                f"connection closed inside a frame: {self.buffered} byte(s) of "
                f"{'an unknown size' if self._need is None else self._need} received"
            )
