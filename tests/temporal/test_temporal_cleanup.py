"""A harness killed with SIGKILL mid-run leaves nothing behind for long: its
Temporal dev server dies with it (a parent-death signal), and the next run's
sweep removes the server's folder -- it never removes a live run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_temporal_search import ADAPTER, ROOT, processes_of

from harness import _janitor

pytestmark = pytest.mark.slow


def test_after_a_sigkill_of_the_harness_the_next_sweep_leaves_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    path = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env |= {"TMPDIR": str(tmp_path), "PYTHONPATH": path}
    opts = ("--adapter", ADAPTER, "--adapter-opt", "app=examples.temporal_refund.careful:APP")
    argv = [sys.executable, "-m", "harness.cli", "run", *opts, "--profile", "dev"]
    harness = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        # Killed once a worker has started: the server is up and in use.
        while not list(tmp_path.glob("harness-*/**/workers.log")):
            assert harness.poll() is None and time.monotonic() < deadline, "no worker started"
            time.sleep(0.1)
        [folder] = tmp_path.glob("harness-temporal-*")
        assert _janitor.sweep_folders(tmp_path) == [], "a live run's folder is kept"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    while processes_of(tmp_path):  # the server, the fork server and its workers die
        assert time.monotonic() < deadline + 30, processes_of(tmp_path)
        time.sleep(0.1)
    assert folder.exists()  # until the next run sweeps
    assert folder.name in _janitor.sweep_folders(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("harness-*-*")) == []
