"""``harness run --jobs N`` waits for no job without a bound, and its jobs
keep quiet when stopped (issue 27, defects 7 and 8).

On ``a4dae93``: with one job SIGSTOPped the parent waited forever, past
``--budget`` (the first test then runs into its timeout); a SIGINT passed
on to a job still importing printed the job's ``KeyboardInterrupt``
traceback; a SIGKILLed parent left its job running, which then died
printing ``BrokenPipeError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """What a test starts, killed at its end whatever happened (its own
    process group: the harness and its fork server)."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _start(tmp_path: Path, *plan: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference", "--profile",
         "dev", "--seed", "2", "--jobs", "2", "--report-dir", str(tmp_path / "r"), *plan],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # a signal for it reaches nothing else of this test
    )  # fmt: skip


def _job(parent: int, within: float = 60.0) -> int:
    """The pid of job 2 of ``parent``, as soon as it exists."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"harness._job" in cmd:
                return int(entry.name)
        time.sleep(0.002)
    raise AssertionError("no job process started")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _report(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "r" / "report.json").read_text())
    return data


@pytest.mark.timeout(240)
def test_a_stopped_job_is_killed_and_named_once_the_budget_allows_no_more(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """Job 2 SIGSTOPped as it starts: it never sends a thing. Once the
    parent's share has ended, the parent gives it what a run may last
    (``--budget 3`` + a quarter for shrinking) plus as long as its own
    share took, then kills it: exit 3, its part of the plan missing, the
    report says why."""
    proc = _start(tmp_path, "--max-examples", "4", "--budget", "3")
    started.append(proc)
    job = _job(proc.pid)
    os.kill(job, signal.SIGSTOP)
    try:
        out, err = proc.communicate(timeout=200)
    finally:
        if _alive(job):
            os.kill(job, signal.SIGKILL)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in out + err, out + err
    report = _report(tmp_path)
    assert report["verdict"] == "unknown"
    assert report["merged"]["missing"] == [2], report["merged"]
    assert any(
        "job 2 of 2 sent nothing for" in why and "and was killed" in why
        for why in report["inconclusive"]
    ), report["inconclusive"]
    assert not _alive(job)


@pytest.mark.timeout(240)
def test_a_signal_passed_to_a_job_still_starting_prints_nothing(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    proc = _start(tmp_path, "--max-examples", "20", "--budget", "600")
    started.append(proc)
    _job(proc.pid)
    proc.send_signal(signal.SIGINT)  # the job is still importing the engine
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, out + err
    assert err.strip().splitlines()[-1].startswith("harness: SIGINT: stopped"), err


@pytest.mark.timeout(240)
def test_a_job_whose_parent_was_killed_stops_quietly(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    proc = _start(tmp_path, "--max-examples", "60", "--budget", "600")
    started.append(proc)
    job = _job(proc.pid)
    assert proc.stdout is not None
    for line in proc.stdout:  # both are searching
        if line.startswith("harness: scenario 1 "):
            break
    os.kill(proc.pid, signal.SIGKILL)
    # The job shares the parent's stderr: EOF once it and all it started are gone.
    _, err = proc.communicate(timeout=200)
    deadline = time.monotonic() + 60
    while _alive(job) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(job), "the job outlived its parent by a minute"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
