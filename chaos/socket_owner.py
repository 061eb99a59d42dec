"""Which local process opened a loopback TCP connection (Linux /proc).

The fault proxies must know which node a connection comes from, but the nodes
all dial the same proxy addresses from 127.0.0.1 (pysyncobj identifies peers by
those address strings, so every node must use the same ones). The kernel knows
better: the accepted connection's peer port is the local port of a socket in
/proc/net/tcp, whose inode appears in exactly one process's /proc/<pid>/fd.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def _hex_endpoint(host: str, port: int) -> str:
    a, b, c, d = (int(x) for x in host.split("."))
    return f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X}"  # /proc/net/tcp is little-endian per address


def socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of the TCP socket with this local and remote address, if it exists."""
    want_local, want_remote = _hex_endpoint(*local), _hex_endpoint(*remote)
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == want_local and fields[2] == want_remote:
                    return int(fields[9])
    except OSError:
        return None
    return None


def pid_holding(inode: int, pids: Iterable[int]) -> int | None:
    """The first of `pids` with an open file descriptor on socket `inode`."""
    target = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{fd_dir}/{name}") == target:
                    return pid
            except OSError:
                continue
    return None


def connection_owner(peer: tuple[str, int], us: tuple[str, int], pids: Iterable[int]) -> int | None:
    """Pid (among `pids`) that holds the far end of a connection we accepted from `peer` on `us`."""
    inode = socket_inode(peer, us)
    return None if inode is None else pid_holding(inode, pids)
