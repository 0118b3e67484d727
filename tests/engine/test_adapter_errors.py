"""An adapter that raises or breaks the contract is an adapter error: exit 2,
one clear line, its traceback kept in the report folder; only a failed
property exits 1 (issue 13, defect 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_support import harness_cli, subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = subprocess_env(extra)
    env["PYTHONPATH"] += os.pathsep + str(ROOT)  # examples.minimal_adapter
    return env


def _run(adapter: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--adapter",
            f"hostile_adapters:{adapter}",
            "--max-examples",
            "2",
            "--report-dir",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=_env(env),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("adapter", "says"),
    [
        ("CtorBoom", "raised KeyError: \"missing configuration 'api_key'\""),
        ("WorkflowsGarbage", "returned str items, not harness.adapters.WorkflowSpec"),
        ("OpenRaises", "OpenRaises.open() raised ConnectionRefusedError"),
        ("ObserveRaises", "observe() raised ZeroDivisionError: observe is broken"),
        ("ObserveNaN", "wake_at of run"),
        ("ObserveGarbage", "returned dict, not a harness.adapters.Observation"),
        ("CloseRaises", "close() raised OSError: close failed"),
        (
            "AdapterCloseRaises",
            "AdapterCloseRaises.close() raised RuntimeError: cannot stop the runtime's server",
        ),
        ("MisspelledTarget", "wroker_main"),
    ],
)
def test_a_misbehaving_adapter_is_an_adapter_error(adapter: str, says: str, tmp_path: Path) -> None:
    proc = _run(adapter, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "harness: adapter error: " in proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_runtime_that_refuses_every_decision_is_a_finding_not_an_adapter_error(
    tmp_path: Path,
) -> None:
    """``deliver`` is the runtime's answer (recorded in the history, like
    ``submit``'s): a runtime that raises on every valid decision leaves its
    gated runs waiting forever, and that is a failure of the runtime (exit
    1, ``progress``, the fault-free probe as counterexample). It used to
    be refused as an adapter error (exit 2) from the site profile."""
    proc = _run("DeliverRaises", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "adapter error" not in proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    progress = next(p for p in report["properties"] if p["name"] == "progress")
    assert progress["verdict"] == "fail"
    assert "the fault-free run of workflow 'refund' never completed" in progress["message"]
    assert "the runtime did not act on the decision delivered" in progress["message"]


def test_the_adapters_traceback_is_kept_in_the_report_folder(tmp_path: Path) -> None:
    proc = _run("ObserveRaises", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    saved = tmp_path / "r" / "adapter-error.txt"
    assert f"the adapter's traceback is in {saved}" in proc.stderr
    text = saved.read_text()
    assert "Traceback" in text and "hostile_adapters.py" in text and "ZeroDivisionError" in text


def test_a_module_that_fails_on_import_is_an_adapter_error(tmp_path: Path) -> None:
    proc = _run("ToyAdapter", tmp_path, HOSTILE_IMPORT_BOOM="1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "adapter module 'hostile_adapters' raised RuntimeError while it was imported" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-examples", "-1"], "max-examples=-1 is out of range"),
        (["--max-examples", "0"], "max-examples=0 is out of range"),
        (["--budget", "nan"], "budget=nan is out of range"),
        (["--budget", "-1"], "budget=-1.0 is out of range"),
        (["--budget", "0"], "budget=0.0 is out of range"),
        (["--adapter-opt", "lease_seconds=-5"], "lease_seconds='-5' is out of range"),
        (["--adapter-opt", "lease_seconds=nan"], "lease_seconds='nan' is out of range"),
        # shorter than the margin an external call needs: the run never moved on
        (["--adapter-opt", "lease_seconds=0.5"], "lease_seconds='0.5' is out of range"),
        (["--adapter-opt", "network_timeout=0"], "network_timeout='0': give the seconds"),
        (["--adapter-opt", "network_timeout=soon"], "network_timeout='soon': give the seconds"),
    ],
)
def test_bad_numbers_are_refused_before_anything_runs(
    args: list[str], says: str, tmp_path: Path
) -> None:
    """Issue 13, defect 6: --max-examples -1 ran 92 scenarios, 0 printed PASS
    after none, lease_seconds=nan ran 153 s and reported a false failure."""
    proc = harness_cli(
        "run", "--adapter", "reference", *args, "--report-dir", str(tmp_path / "r"), cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr
    assert not (tmp_path / "r").exists(), "nothing runs, nothing is written"


def test_a_worker_that_never_exits_is_killed_within_the_budget(tmp_path: Path) -> None:
    """It was a traceback after 120 s, whatever --budget said."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--adapter",
            "hostile_adapters:StuckWorker",
            "--budget",
            "10",
            "--report-dir",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=_env({}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did not exit within 30 s" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 100
