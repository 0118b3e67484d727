"""The command line and the network backend: which one runs is said, a bad
choice or a dead server the user named is refused before the run (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness import _toxiproxy

ROOT = Path(__file__).resolve().parents[2]


def _harness(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_named_server_that_does_not_answer_is_refused_before_the_run(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_toxiproxy._free_port()}"  # nothing listens there
    proc = _harness(
        "run",
        "--adapter",
        "reference",
        "--report-dir",
        str(tmp_path / "report"),
        cwd=tmp_path,
        HARNESS_TOXIPROXY_URL=dead,
        HARNESS_NETWORK_BACKEND="auto",
    )
    assert proc.returncode == 2, proc.stderr
    assert f"HARNESS_TOXIPROXY_URL={dead!r} does not answer" in proc.stderr
    assert not (tmp_path / "report").exists()  # refused before anything ran


def test_an_unknown_backend_in_the_environment_is_refused(tmp_path: Path) -> None:
    proc = _harness("run", "--adapter", "reference", cwd=tmp_path, HARNESS_NETWORK_BACKEND="netem")
    assert proc.returncode == 2
    assert "HARNESS_NETWORK_BACKEND='netem' is not auto, toxiproxy or kernel" in proc.stderr


def test_list_services_says_which_backend_the_network_faults_run_on(tmp_path: Path) -> None:
    none = _harness(
        "list",
        "services",
        cwd=tmp_path,
        HARNESS_TOXIPROXY_URL="",
        HARNESS_TOXIPROXY_BIN=str(tmp_path / "no-such-server"),
        HARNESS_NETWORK_BACKEND="toxiproxy",
    )
    assert none.returncode == 0, none.stderr
    last = none.stdout.splitlines()[-1]
    assert last.startswith("network faults run on: none: --network-backend toxiproxy, but "), last
    assert "no-such-server is not an executable file" in last
