"""One connection's sockets, as the kernel's tables show them (``ss``)."""

from __future__ import annotations

import ipaddress
import subprocess
import time

from ._rules import (
    NetfilterError,
)


def _ss_host(host: str) -> str:
    return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host


def _ss_filter(local: tuple[str, int], peer: tuple[str, int]) -> list[str]:
    return [
        "src",
        _ss_host(local[0]),
        "sport",
        "=",
        f":{local[1]}",
        "dst",
        _ss_host(peer[0]),
        "dport",
        "=",
        f":{peer[1]}",
    ]


def socket_open(local: tuple[str, int], peer: tuple[str, int]) -> bool:
    """Whether a TCP socket of this host has ``local`` as its own end and
    ``peer`` as the other (in any state but closed)."""
    got = subprocess.run(
        ["ss", "-H", "-t", "-a", "-n", *_ss_filter(local, peer)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return bool(got.stdout.strip())


def reset_server_end(server: tuple[str, int], client: tuple[str, int], wait: float = 30.0) -> bool:
    """Abort the server's end of one connection (``ss -K``, the kernel's
    ``SOCK_DESTROY``), which sends the client a reset, and wait until the
    server process has let go of it (so has its transaction and its locks).

    A reset only the client sees would leave the server's transaction open,
    holding row locks, for as long as the server's keepalives allow (two
    hours by default): that is a fault of its own, not this one. Returns
    whether the server's end was found."""
    got = subprocess.run(
        ["ss", "-K", "-H", "-t", "-n", *_ss_filter(server, client)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if got.returncode != 0:
        raise NetfilterError(f"ss -K refused: {' '.join(got.stderr.split())}")
    found = bool(got.stdout.strip())
    deadline = time.monotonic() + wait
    # The server process closes its socket once its session has ended (its
    # transaction rolled back, its locks released): a barrier, not a delay.
    while socket_open(server, client) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found
