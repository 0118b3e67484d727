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
from urllib.parse import parse_qs, unquote, urlsplit

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


#: the network fault kinds aimed at the connection a worker's transaction
#: is using (the first service ``network_services()`` names); a partition
#: silences every service named
_ON_THE_STORE = (
    "commit_ack_lost", "reset_mid_transaction", "latency", "slow_reply", "cut_reply",
    "commit_lost",
)  # fmt: skip


def _postgres_host(url: str) -> tuple[str, bool]:
    """(host, hostaddr given) of a libpq connection string or URL."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(url)
        return str(params.get("host") or ""), bool(params.get("hostaddr"))
    except Exception:  # no psycopg, or a string it refuses: read it plainly
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        host = unquote(parts.hostname or "") or (query.get("host") or [""])[0]
        return host, bool(query.get("hostaddr"))


def unix_socket(url: str) -> str | None:
    """Where ``url`` -- a PostgreSQL (URL or ``key=value``) or Redis URL --
    reaches its server over a Unix socket: the socket's directory or path,
    as libpq or redis-py would pick it; None over TCP, and for a URL of no
    server (SQLite's). A libpq string without a host takes ``PGHOST``, else
    the socket directory libpq was built with."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("unix", "redis+unix"):
        return urlsplit(url).path or url
    if scheme in ("redis", "rediss", "sqlite") or scheme.startswith("sqlite+"):
        return None
    if scheme not in ("postgres", "postgresql", "") or (not scheme and "=" not in url):
        return None
    host, hostaddr = _postgres_host(url)
    if hostaddr:
        return None
    host = (host or os.environ.get("PGHOST", "")).split(",")[0]
    if not host:
        return "libpq's default socket directory"
    return host if host.startswith(("/", "@")) else None


def _shown(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def network_gaps(adapter: object) -> dict[str, str]:
    """Per service the adapter's optional ``network_services()`` names
    (service -> URL) whose connections the kernel backend cannot reach:
    why, in a sentence's tail. Netfilter rules match TCP ports; a Unix
    socket has none. Empty without ``network_services()``."""
    named = getattr(adapter, "network_services", None)
    if named is None:
        return {}
    out: dict[str, str] = {}
    for service, url in dict(named()).items():
        path = unix_socket(url)
        if path is not None:
            out[service] = (
                f"the {service} connection is a Unix socket ({_shown(url)}: {path}), which "
                f"netfilter rules cannot touch; give {service} a TCP URL (host 127.0.0.1) to "
                "test them"
            )
    return out


def offered_network_kinds(adapter: object, kinds: Collection[str]) -> tuple[str, ...]:
    """Of the network fault ``kinds``, those the kernel backend can inflict
    on ``adapter``'s connections (see :func:`network_gaps`): a lost
    acknowledgement and a reset need the first service named (the store
    the workers' transactions use) over TCP; a partition, every one."""
    named = getattr(adapter, "network_services", None)
    if named is None:
        return tuple(kinds)
    services = list(dict(named()))
    gaps = network_gaps(adapter)
    out = []
    for kind in kinds:
        if kind in _ON_THE_STORE and services and services[0] in gaps:
            continue
        if kind in ("partition", "partition_after_apply") and gaps:
            continue
        out.append(kind)
    return tuple(out)
