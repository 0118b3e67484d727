"""A worker's TCP connections, read from ``/proc``: ``network_endpoints()``
for an adapter whose workers cannot name their own connection.

The reference runtime's workers log the connection they use at a crash
point. A runtime without such a hook (LangGraph's ``PostgresSaver``, say)
still has a worker process with a pid: its sockets are the ``socket:[inode]``
links under ``/proc/<pid>/fd``, and ``/proc/net/tcp`` / ``tcp6`` give each
inode's two ends. Linux only; an empty list elsewhere or for a process that
is gone.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Collection

from ._contract import Endpoint

#: ``st`` of an established connection in ``/proc/net/tcp``
_ESTABLISHED = "01"


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # The kernel prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def tcp_connections(
    pid: int, remote_ports: Collection[int] = (), service: str = "storage"
) -> list[Endpoint]:
    """The established TCP connections process ``pid`` holds (to one of
    ``remote_ports``, if given), as :class:`Endpoint` values named
    ``service``. Not which one is in use: a worker paused between two steps
    may hold several pooled connections, and a network fault then acts on
    the first."""
    inodes = _socket_inodes(pid)
    out: list[Endpoint] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _ESTABLISHED or fields[9] not in inodes:
                continue
            local, remote = _address(fields[1]), _address(fields[2])
            if remote_ports and remote[1] not in remote_ports:
                continue
            out.append(
                Endpoint(
                    local_host=local[0],
                    local_port=local[1],
                    remote_host=remote[0],
                    remote_port=remote[1],
                    service=service,
                )
            )
    return out
