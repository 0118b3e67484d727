"""Whether the kernel backend can run here (root, iptables), and the latency
fault with it (``tc`` netem)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

from ._rules import (
    _iptables,
)

_unavailable: dict[str, str | None] = {}


def unavailable() -> str | None:
    """Why netfilter rules cannot be used here, or None if they can.

    Asked of ``iptables`` on the current ``PATH`` (once per process and
    ``PATH``): missing, or refusing to list the filter table (not root, no
    ``CAP_NET_ADMIN``, no netfilter in the kernel)."""
    path = os.environ.get("PATH", "")
    if path in _unavailable:
        return _unavailable[path]
    reason: str | None = None
    missing = [tool for tool in ("iptables", "ss") if shutil.which(tool) is None]
    if missing:
        reason = (
            f"{' and '.join(missing)} not installed (or not on PATH); install them "
            "(apt-get install -y iptables iproute2) and run the harness as root"
        )
    else:
        try:
            got = _iptables("iptables", "-S", "INPUT")
        except (OSError, subprocess.SubprocessError) as exc:
            reason = f"iptables could not be run ({type(exc).__name__}: {exc})"
        else:
            if got.returncode != 0:
                said = " ".join(got.stderr.split())[:200] or f"exit {got.returncode}"
                reason = f"iptables refused to list rules ({said}); the harness must run as root"
    _unavailable[path] = reason
    return reason


_latency: list[str] = []
#: what :func:`latency_unavailable` asks of ``tc`` in its throwaway namespace
NETEM_PROBE = ("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")


def latency_unavailable() -> str:
    """Why this backend cannot delay one worker's packets (the ``latency``
    kind): netfilter drops, rejects and queues packets but never holds them
    back; that takes the ``netem`` queueing discipline, asked here in a
    throwaway network namespace (never on the host's own interfaces). Even
    where the kernel has it, a per-connection delay is not built."""
    if _latency:
        return _latency[0]
    said = "not asked"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        said = "ip and tc (iproute2) are not installed"
    else:
        ns = f"sah-probe-{secrets.token_hex(4)}"
        try:
            made = subprocess.run(
                ["ip", "netns", "add", ns], capture_output=True, text=True, check=False, timeout=30
            )
            if made.returncode != 0:
                said = f"ip netns add refused: {' '.join(made.stderr.split())[:200]}"
            else:
                got = subprocess.run(
                    ["ip", "netns", "exec", ns, *NETEM_PROBE],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=30,
                )
                said = (
                    "the kernel has netem"
                    if got.returncode == 0
                    else f"tc netem: {' '.join(got.stderr.split())[:200]}"
                )
        except (OSError, subprocess.SubprocessError) as exc:
            said = f"{type(exc).__name__}: {exc}"
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False, timeout=30)
    reason = (
        "the kernel backend cannot delay one connection's packets: netfilter drops or "
        f"resets them but never holds them back, and a delay needs the netem qdisc ({said}); "
        "no latency fault is built on this backend"
    )
    _latency.append(reason)
    return reason
