"""Which backend the network faults run on: where a Toxiproxy server comes
from, else the kernel's, else none (with why)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from typing import Literal

ENV_URL = "HARNESS_TOXIPROXY_URL"
ENV_BIN = "HARNESS_TOXIPROXY_BIN"
ENV_BACKEND = "HARNESS_NETWORK_BACKEND"
#: what ``--network-backend`` accepts
MODES = ("auto", "toxiproxy", "kernel")
#: the program looked for on ``PATH``
PROGRAM = "toxiproxy-server"
Backend = Literal["toxiproxy", "kernel"]


@dataclass(frozen=True)
class Choice:
    """Which backend the network faults use here, and why (or why none)."""

    backend: Backend | None
    #: a sentence: where the server comes from, or why no backend can run
    reason: str

    def describe(self) -> str:
        return f"{self.backend or 'none'}: {self.reason}"


def _mode(mode: str | None) -> str:
    got = (mode or os.environ.get(ENV_BACKEND) or "auto").strip().lower()
    if got not in MODES:
        raise ValueError(
            f"network backend {got!r} is not one of {', '.join(MODES)}: set "
            f"{ENV_BACKEND} (or --network-backend) to auto, toxiproxy or kernel"
        )
    return got


def server_source() -> tuple[str, str] | str:
    """Where a Toxiproxy server comes from: ``("url", URL)`` (the user's),
    ``("bin", PATH)`` (one the harness starts), or why there is none."""
    if importlib.util.find_spec("httpx") is None:
        return (
            "httpx, the client of a Toxiproxy server's API, is not installed "
            "(pip install 'stateful-agent-harness[toxiproxy]')"
        )
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return ("url", url)
    binary = os.environ.get(ENV_BIN, "").strip()
    if binary:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            return f"{ENV_BIN}={binary} is not an executable file"
        return ("bin", binary)
    found = shutil.which(PROGRAM)
    if found:
        return ("bin", found)
    return (
        f"no Toxiproxy server: set {ENV_URL} to a running server's API "
        f"(http://127.0.0.1:8474), or {ENV_BIN} to a toxiproxy-server binary, or put "
        f"{PROGRAM} on PATH"
    )


def choose(mode: str | None = None) -> Choice:
    """The backend for ``mode`` (default: ``HARNESS_NETWORK_BACKEND``, else
    ``auto``). Raises ValueError for an unknown mode."""
    from .. import _netfilter

    got = _mode(mode)
    source = server_source()
    if got in ("auto", "toxiproxy") and isinstance(source, tuple):
        kind, where = source
        said = f"the server at {where}" if kind == "url" else f"a server started from {where}"
        return Choice("toxiproxy", f"Toxiproxy, {said}")
    toxi_why = source if isinstance(source, str) else ""
    if got == "toxiproxy":
        return Choice(None, f"--network-backend toxiproxy, but {toxi_why}")
    kernel_why = _netfilter.unavailable()
    if kernel_why is None:
        return Choice("kernel", "netfilter rules (root and iptables)")
    if got == "kernel":
        return Choice(None, f"--network-backend kernel, but {kernel_why}")
    return Choice(None, f"{toxi_why}; and the kernel backend cannot run either: {kernel_why}")
