"""Netfilter rules of the harness: tagged with their owner, removed by the
owner, and swept once the owner is dead -- never while it lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import _janitor, _netfilter

Listed = Callable[[str], list[str]]

#: A harness-like process: takes its owner lock, adds a rule on a port no
#: one uses, says so, then waits to be killed.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from harness import _netfilter
    owner = _netfilter.owner()
    owner.add(_netfilter.Rule("drop_to_client", client_port=int(sys.argv[1]), server_port=5432))
    print(owner.token, flush=True)
    time.sleep(600)
    """
)
ROOT = Path(__file__).resolve().parents[2]


def _holder(port: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    token = proc.stdout.readline().strip()
    assert token, "the holder process did not add its rule"
    return proc, token


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_a_rule_carries_its_owners_tag_and_goes_when_the_block_ends(listed: Listed) -> None:
    owner = _netfilter.owner()
    rule = _netfilter.Rule("reset_to_server", client_port=1, server_port=5432)
    with owner.holding(rule):
        lines = listed(owner.token)
        assert len(lines) == 1
        assert "--sport 1 " in lines[0] and "tcp-reset" in lines[0]
        assert f"sah-net:{owner.token}" in lines[0]
        # Its owner lives: a sweep leaves it alone.
        _netfilter.sweep_rules()
        assert len(listed(owner.token)) == 1
    assert listed(owner.token) == []


def test_a_rule_goes_even_when_the_block_raises(listed: Listed) -> None:
    owner = _netfilter.owner()
    rule = _netfilter.Rule("drop_to_client", client_port=2, server_port=5432)
    with pytest.raises(KeyboardInterrupt), owner.holding(rule):
        raise KeyboardInterrupt
    assert listed(owner.token) == []


def test_a_live_owners_rules_survive_a_sweep_from_another_process(listed: Listed) -> None:
    proc, token = _holder(3)
    try:
        assert _janitor.sweep()["netfilter"] == []
        assert len(listed(token)) == 1
    finally:
        _kill(proc)
        _netfilter.sweep_rules()
    assert listed(token) == []


def test_the_next_sweep_removes_the_rules_of_harnesses_killed_by_sigkill(
    listed: Listed, kill_reaper: Callable[[str], None]
) -> None:
    holders = [_holder(port) for port in (4, 5, 6)]
    for proc, token in holders:
        kill_reaper(token)  # killed first: else it removes the rules itself
        _kill(proc)
    tokens = [token for _, token in holders]
    assert all(len(listed(t)) == 1 for t in tokens), "each killed holder left its rule"
    swept = _janitor.sweep()["netfilter"]
    assert isinstance(swept, list)
    assert sorted(t for t in tokens if any(t in line for line in swept)) == sorted(tokens)
    assert [line for t in tokens for line in listed(t)] == []


def test_without_iptables_on_path_the_backend_says_why() -> None:
    code = "from harness import _netfilter; print(_netfilter.unavailable())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert "iptables and ss not installed" in out.stdout
