"""Which process is at the other end of a loopback TCP connection (Linux).

The world's HTTP face must know which process sent a request, without the
app's help, to record it and to kill it when a fault says so. Linux says it
through ``/proc``: ``/proc/net/tcp`` (and ``tcp6``) lists each socket of this
network namespace with its two addresses and its inode, and
``/proc/<pid>/fd/<n>`` of the process that holds it links to
``socket:[<inode>]``. So the client's port gives its socket's inode, and the
inode its process. Reading another process's ``fd`` folder needs the same
user (or root); a process this cannot see is reported as unknown (None),
never guessed.

The inode is asked of the kernel first through a ``NETLINK_SOCK_DIAG``
socket (the interface ``ss`` uses): one exact lookup, about 0.2 ms here,
where reading ``/proc/net/tcp`` took 20-40 ms on a busy machine with a few
hundred sockets. The table stays the fallback.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Iterable, Sequence

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
#: inode -> (pid, fd) found last time: a keep-alive connection asks again
_FOUND: dict[int, tuple[int, int]] = {}


def _address(text: str) -> tuple[str, int]:
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntoa(struct.pack("<I", int(host, 16)))
    else:  # four little-endian 32-bit words
        words = struct.unpack("<4I", raw)
        ip = socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))
        ip = ip.removeprefix("::ffff:")
    return ip, int(port, 16)


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_TCP_LISTEN = 10


def _diag_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of the TCP socket ``local`` -> ``remote``, asked of the
    kernel (``inet_diag_req_v2`` for one socket id; the reply's
    ``inet_diag_msg`` holds the inode at byte 68). None if not found."""
    family = socket.AF_INET6 if ":" in local[0] else socket.AF_INET
    raw = [socket.inet_pton(family, ip).ljust(16, b"\0") for ip in (local[0], remote[0])]
    request = (
        struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
        + struct.pack(">HH", local[1], remote[1])
        + raw[0]
        + raw[1]
        + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, no cookie
    )
    header = struct.pack("=LHHLL", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5.0)
        nl.sendto(header + request, (0, 0))
        reply = nl.recv(65536)
    length, kind = struct.unpack_from("=LH", reply, 0)
    if kind != _SOCK_DIAG_BY_FAMILY or length < 16 + 72:
        return None  # NLMSG_ERROR: no such socket
    # The kernel's lookup falls back to a listening socket on the port when
    # the connection is gone: take only the very connection asked for.
    state = reply[16 + 1]
    ports = struct.unpack_from(">HH", reply, 16 + 4)
    if state == _TCP_LISTEN or ports != (local[1], remote[1]):
        return None
    inode = int(struct.unpack_from("=I", reply, 16 + 68)[0])
    return inode or None


def socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of this namespace's TCP socket bound to ``local`` and
    connected to ``remote`` (None if there is none, or no ``/proc``)."""
    try:
        found = _diag_inode(local, remote)
    except (OSError, ValueError, struct.error):
        found = None  # no netlink here: read the table
    if found is not None:
        return found
    # Compare the ports as the table spells them first: parsing every line's
    # addresses costs more than reading the table.
    ports = (f":{local[1]:04X} ", f":{remote[1]:04X} ")
    for table in _TABLES:
        try:
            with open(table, encoding="ascii") as fh:
                next(fh, None)  # the header
                for line in fh:
                    if ports[0] not in line or ports[1] not in line:
                        continue
                    parts = line.split()
                    if len(parts) < 10:
                        continue
                    if _address(parts[1]) == local and _address(parts[2]) == remote:
                        inode = int(parts[9])
                        if inode:
                            return inode
        except OSError:
            continue
    return None


def _holds(pid: int, fd: int, inode: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]"
    except OSError:
        return False


def socket_holder(
    inode: int, *, only: int | None = None, first: Sequence[int] = ()
) -> tuple[int, int] | None:
    """(pid, fd) of a process holding socket ``inode``: ``only`` that pid if
    given, else any: the pids in ``first`` are searched first (the workers
    that said who they are), then the others, newest first (a caller is
    most often a process started a moment ago; when several hold the
    socket, after a fork, the first found is taken)."""
    cached = _FOUND.get(inode)
    if cached is not None and (only is None or cached[0] == only) and _holds(*cached, inode):
        return cached
    link = f"socket:[{inode}]"
    if only is not None:
        pids: Iterable[int] = [only]
    else:
        every = sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=True)
        known = set(first)
        pids = [*first, *(p for p in every if p not in known)]
    for pid in pids:
        with contextlib.suppress(OSError):
            for name in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{name}") == link:
                        if len(_FOUND) > 4096:  # inodes of closed connections
                            _FOUND.clear()
                        _FOUND[inode] = (pid, int(name))
                        return pid, int(name)
    return None


def peer_pid(
    client: tuple[str, int], server: tuple[str, int], first: Sequence[int] = ()
) -> int | None:
    """The process that holds the client end of the loopback connection from
    ``client`` to ``server`` (None if it cannot be found); the pids in
    ``first`` are the likeliest."""
    inode = socket_inode(client, server)
    if inode is None:
        return None
    found = socket_holder(inode, first=first)
    return None if found is None else found[0]


def own_socket_fd(server: tuple[str, int], client: tuple[str, int]) -> int | None:
    """This process's file descriptor of the server end of that connection."""
    inode = socket_inode(server, client)
    if inode is None:
        return None
    found = socket_holder(inode, only=os.getpid())
    return None if found is None else found[1]


def parent_pid(pid: int) -> int | None:
    """``pid``'s parent (None once gone, or for pid 1)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return ppid or None


def ancestry(pid: int, limit: int = 64) -> list[int]:
    """``pid``, its parent, theirs... up to pid 1 (at most ``limit``)."""
    out = [pid]
    while len(out) < limit:
        parent = parent_pid(out[-1])
        if parent is None or parent in out:
            break
        out.append(parent)
    return out


def is_gone(pid: int) -> bool:
    """Whether ``pid`` has died (a zombie counts: it runs no more code)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] in ("Z", "X")
