"""Physical limits of this machine, the ceiling for every other figure.

1. sequential file writes in 1 MiB blocks: without fsync (page cache), with an
   fsync after every block, and with a single fsync at the end — fio when it
   is installed, else Python's os.write (a 1 MiB write is one syscall either way);
2. loopback TCP from one process to another: iperf3 when installed, else a
   Python sink process reading into a reused buffer while this one sends.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

MB = 1_000_000
BLOCK = 1 << 20


@dataclass(frozen=True)
class Row:
    case: str
    value: str
    detail: str = ""


def _fio(directory: str, fsync: int, size_mb: int) -> float | None:
    """MB/s of fio's sequential 1 MiB writes, or None without fio."""
    if shutil.which("fio") is None:
        return None
    out = subprocess.run(
        ["fio", "--name=seq", f"--directory={directory}", "--rw=write", "--bs=1M",
         f"--size={size_mb}M", "--ioengine=psync", f"--fsync={fsync}", "--end_fsync=1",
         "--output-format=json"], capture_output=True, text=True, check=True)
    job = json.loads(out.stdout)["jobs"][0]["write"]
    return job["bw_bytes"] / MB


def _python_write(directory: str, total: int, fsync_every_block: bool, fsync_at_end: bool) -> float:
    block = os.urandom(BLOCK)
    path = os.path.join(directory, "limits.dat")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(total // BLOCK):
            os.write(fd, block)
            if fsync_every_block:
                os.fsync(fd)
        if fsync_at_end:
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return total / MB / elapsed


_SINK = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
buf = bytearray(1 << 20)
total = 0
while True:
    n = conn.recv_into(buf)
    if not n:
        break
    total += n
print(total, flush=True)
"""


def _python_loopback(seconds: float = 2.0) -> float:
    sink = subprocess.Popen([sys.executable, "-c", _SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        port = int(sink.stdout.readline())
        block = os.urandom(BLOCK)
        sent = 0
        with socket.create_connection(("127.0.0.1", port)) as sock:
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                sock.sendall(block)
                sent += BLOCK
            sock.shutdown(socket.SHUT_WR)
            received = int(sink.stdout.readline())  # the sink has read everything
            elapsed = time.perf_counter() - start
        assert received == sent, f"the sink read {received} bytes, {sent} were sent"
        return sent / MB / elapsed
    finally:
        if sink.poll() is None:
            sink.kill()
        sink.wait()


def _iperf3(seconds: int = 3) -> float | None:
    if shutil.which("iperf3") is None:
        return None
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # the server needs a moment to listen
            try:
                out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", "5299", "-t", str(seconds),
                                      "-J"], capture_output=True, text=True, check=True)
                break
            except subprocess.CalledProcessError:
                time.sleep(0.1)
        else:
            return None
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8 / MB
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def run(write_mb: int = 512, fsync_mb: int = 64) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="raftka-limits-") as tmp:
        tool = "fio" if shutil.which("fio") else "Python os.write"
        # Best of two: the first pass also pays for allocating the file's blocks.
        no_sync = _fio(tmp, 0, write_mb) or max(
            _python_write(tmp, write_mb * MB, False, False) for _ in range(2))
        rows.append(Row("sequential write, no fsync (page cache)", f"{no_sync:,.0f} MB/s",
                        f"{write_mb} MB in 1 MiB writes, {tool}"))
        end_sync = _python_write(tmp, write_mb * MB, False, True)
        rows.append(Row("sequential write, one fsync at the end", f"{end_sync:,.0f} MB/s",
                        f"{write_mb} MB, Python os.write + os.fsync"))
        each = _fio(tmp, 1, fsync_mb) or _python_write(tmp, fsync_mb * MB, True, False)
        rows.append(Row("sequential write, fsync after every 1 MiB", f"{each:,.0f} MB/s",
                        f"{fsync_mb} MB, {tool}"))
    iperf = _iperf3()
    if iperf is not None:
        rows.append(Row("loopback TCP, one stream", f"{iperf:,.0f} MB/s", "iperf3"))
    else:
        rows.append(Row("loopback TCP, one stream", f"{_python_loopback():,.0f} MB/s",
                        "Python sendall -> a sink process recv_into (iperf3 not installed)"))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = ["| case | result | detail |", "|---|---|---|"]
    lines += [f"| {r.case} | {r.value} | {r.detail} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run()))
