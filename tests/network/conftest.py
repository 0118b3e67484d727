"""The kernel backend needs iptables and root: CI has both (``.ci/run``
installs iptables). Elsewhere a test that needs them skips with the reason,
unless ``HARNESS_REQUIRE_SERVICES=1``, where it fails instead."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import _netfilter, _toxiproxy
from reference_runtime import service_urls


@pytest.fixture
def netfilter(monkeypatch: pytest.MonkeyPatch) -> None:
    """iptables works here (skips, or fails in CI, when it does not), and the
    network faults run on it (not on a Toxiproxy server the machine has)."""
    monkeypatch.setenv(_toxiproxy.ENV_BACKEND, "kernel")
    reason = _netfilter.unavailable()
    if reason is None:
        return
    if service_urls.services_required():
        pytest.fail(f"{reason} (HARNESS_REQUIRE_SERVICES=1 forbids skipping)")
    pytest.skip(reason)


def _listed(token: str) -> list[str]:
    out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if token in line]


@pytest.fixture
def listed(netfilter: None) -> Callable[[str], list[str]]:
    """The lines of ``iptables -S`` that carry a token, as a person would list them."""
    return _listed


def _kill_reaper(token: str) -> None:
    """SIGKILL the reaper of ``token``'s rules (found by its command line),
    so that they outlive their owner: what only the sweep, the backstop,
    then removes."""
    tag = f"{_netfilter.COMMENT_PREFIX}{token}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if tag in argv:
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    assert killed == 1, f"{killed} reapers of {token}"


@pytest.fixture
def kill_reaper(netfilter: None) -> Callable[[str], None]:
    """Kills the reaper of an owner's rules (to test the sweep without it)."""
    return _kill_reaper
