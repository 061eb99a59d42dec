"""Which local process opened a loopback TCP connection (Linux /proc).

The fault proxies must know which node a connection comes from, but the nodes
all dial the same proxy addresses from 127.0.0.1 (pysyncobj identifies peers by
those address strings, so every node must use the same ones). The kernel knows
better: the accepted connection's peer port is the local port of a socket in
/proc/net/tcp, whose inode appears in exactly one process's /proc/<pid>/fd.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterable


def _hex_endpoint(host: str, port: int) -> str:
    a, b, c, d = (int(x) for x in host.split("."))
    return f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X}"  # /proc/net/tcp is little-endian per address


# Linux sock_diag (netlink): ask the kernel for one socket by its addresses. Reading
# /proc/net/tcp lists every TCP socket of the machine: 0.16 s for 12 000 sockets (mostly
# TIME_WAIT) on a busy test host, and the fault proxies look up every connection they accept,
# on their one thread; pysyncobj's reconnects then outran the lookups and a run wedged.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF


class _Unavailable:
    """sock_diag cannot answer here (not Linux, no netlink): read the table instead."""


UNAVAILABLE = _Unavailable()


def _diag_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None | _Unavailable:
    """The inode by an exact sock_diag lookup: None when no such socket exists (the dialler may
    have closed it already), UNAVAILABLE when netlink cannot be asked."""
    sockid = (struct.pack(">HH", local[1], remote[1]) + socket.inet_aton(local[0]) + bytes(12)
              + socket.inet_aton(remote[0]) + bytes(12) + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))
    request = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as sock:
            sock.settimeout(1.0)
            sock.send(message)
            answer = sock.recv(65536)
    except (OSError, AttributeError):
        return UNAVAILABLE
    if len(answer) < 16:
        return UNAVAILABLE
    length, kind = struct.unpack_from("=IH", answer)
    if kind == _NLMSG_ERROR and len(answer) >= 20:
        (error,) = struct.unpack_from("=i", answer, 16)
        return None if error == -errno.ENOENT else UNAVAILABLE
    if kind != _SOCK_DIAG_BY_FAMILY or length < 16 + 72 or len(answer) < 16 + 72:
        return UNAVAILABLE
    (inode,) = struct.unpack_from("=I", answer, 16 + 68)
    return inode or None


def socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of the TCP socket with this local and remote address, if it exists."""
    inode = _diag_inode(local, remote)
    if not isinstance(inode, _Unavailable):
        # Also when it is None: a closed dialler is not worth a table read (0.16 s each, and
        # the proxies retry a failed lookup 20 times: dead connections stalled them for seconds).
        return inode
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
