"""Send record bytes straight from segment files to sockets (os.sendfile).

A Fetch response is encoded as a list of chunks (`encode_response_chunks`):
small protocol bytes, and for each partition's records a `FileRegion` naming
byte ranges of segment files. The connection's writer coalesces the small
bytes and hands each region to the kernel with `sendfile`, waiting for the
socket to be writable when it is full. Record bytes never enter Python.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

import trio

from raftka.log.partition_log import FileSlice

# Below this many bytes a region is cheaper to read and copy than to sendfile.
SENDFILE_MIN_BYTES = 16 * 1024


class FileRegion:
    """Whole record batches living in segment files, in order; `len()` is their total size."""

    __slots__ = ("slices", "_size")

    def __init__(self, slices: Sequence[FileSlice]) -> None:
        self.slices = tuple(slices)
        self._size = sum(s.length for s in self.slices)

    def __len__(self) -> int:
        return self._size

    def read(self) -> bytes:
        return b"".join(s.read() for s in self.slices)


class ChunkedResponse:
    """A response frame as chunks: bytes-likes and FileRegions."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list) -> None:
        self.chunks = chunks


async def _sendfile(stream: trio.SocketStream, piece: FileSlice) -> None:
    sock = stream.socket
    offset, remaining = piece.position, piece.length
    in_fd = piece.file.fileno()
    while remaining:
        try:
            sent = os.sendfile(sock.fileno(), in_fd, offset, remaining)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                await trio.lowlevel.wait_writable(sock)
                continue
            raise trio.BrokenResourceError(f"sendfile failed: {exc}") from exc
        if sent == 0:
            raise trio.BrokenResourceError("sendfile: the segment file ended early")
        offset += sent
        remaining -= sent


async def _send_copied(stream: trio.abc.Stream, response: ChunkedResponse) -> None:
    """Under TLS the kernel cannot encrypt: record bytes are read from the segments (in a worker
    thread when large, never blocking the loop) and written through the TLS stream."""
    pending = bytearray()
    for chunk in response.chunks:
        if isinstance(chunk, FileRegion):
            pending += chunk.read() if len(chunk) < SENDFILE_MIN_BYTES else await trio.to_thread.run_sync(chunk.read)
        else:
            pending += chunk
    await stream.send_all(pending)


async def send_response(stream: trio.abc.Stream, response: bytes | ChunkedResponse) -> None:
    """Write one response: plain bytes, or chunks with file regions sent by sendfile (copied
    instead on a TLS stream, where sendfile cannot be used)."""
    if not isinstance(response, ChunkedResponse):
        await stream.send_all(response)
        return
    if not isinstance(stream, trio.SocketStream):
        await _send_copied(stream, response)
        return
    pending = bytearray()
    for chunk in response.chunks:
        if isinstance(chunk, FileRegion):
            if len(chunk) < SENDFILE_MIN_BYTES:
                pending += chunk.read()
                continue
            if pending:
                await stream.send_all(pending)
                pending = bytearray()
            for piece in chunk.slices:
                await _sendfile(stream, piece)
        else:
            pending += chunk
    if pending:
        await stream.send_all(pending)
