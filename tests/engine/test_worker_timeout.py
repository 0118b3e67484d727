"""The worker timeout is a setting (issue 18): ``--worker-timeout``,
``HARNESS_WORKER_TIMEOUT``, ``harness.run(worker_timeout=...)``, else the
adapter's declared ``worker_timeout``, else 120 s; a worker past it is
killed and reported as an adapter error naming the limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_support import subprocess_env

from harness import UsageError, load_settings
from harness._errors import AdapterError
from harness.nemesis import (
    WORKER_TIMEOUT,
    resolve_worker_timeout,
    worker_timeout,
    worker_timeout_limit,
)

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = subprocess_env(env)
    full["PYTHONPATH"] += os.pathsep + str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_setting_then_the_adapter_then_the_default() -> None:
    from lifecycle_adapters import BadWorkerTimeout, StuckDeclaring

    from examples.minimal_adapter.adapter import ToyAdapter

    assert resolve_worker_timeout(None, ToyAdapter()) == WORKER_TIMEOUT == 120.0
    assert resolve_worker_timeout(None, StuckDeclaring()) == 3.0
    assert resolve_worker_timeout(600.0, StuckDeclaring()) == 600.0
    with pytest.raises(AdapterError, match=r"BadWorkerTimeout.worker_timeout is nan"):
        resolve_worker_timeout(None, BadWorkerTimeout())
    # The limit caps what the budget leaves; the 30 s floor only lifts a short budget.
    assert worker_timeout(1000.0) == 120.0
    with worker_timeout_limit(600.0):
        assert worker_timeout(1000.0) == 600.0
        assert worker_timeout(200.0) == 200.0
        assert worker_timeout(5.0) == 30.0
    with worker_timeout_limit(3.0):
        assert worker_timeout(1000.0) == 3.0
    assert worker_timeout(1000.0) == 120.0, "the limit ends with its block"


def test_the_setting_is_read_from_every_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings("dev").worker_timeout is None
    assert load_settings("dev", worker_timeout=300).worker_timeout == 300.0
    monkeypatch.setenv("HARNESS_WORKER_TIMEOUT", "240")
    assert load_settings("dev").worker_timeout == 240.0
    monkeypatch.setenv("HARNESS_WORKER_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="worker_timeout='soon'"):
        load_settings("dev")
    monkeypatch.delenv("HARNESS_WORKER_TIMEOUT")
    for bad in (0.0, -5.0, float("nan"), 1e9):
        with pytest.raises(UsageError, match=r"worker-timeout=.* is out of range"):
            load_settings("dev", worker_timeout=bad)


@pytest.mark.parametrize(
    ("extra", "limit"),
    [((), "3"), (("--worker-timeout", "2"), "2")],
    ids=["declared by the adapter", "--worker-timeout"],
)
def test_a_worker_past_the_limit_is_an_adapter_error_naming_it(
    extra: tuple[str, ...], limit: str, tmp_path: Path
) -> None:
    proc = _cli(
        "run",
        "--adapter",
        "lifecycle_adapters:StuckDeclaring",
        "--max-examples",
        "2",
        "--report-dir",
        str(tmp_path / "r"),
        *extra,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"did not exit within {limit} s" in proc.stderr, proc.stderr


def test_check_adapter_honours_the_limit_too(tmp_path: Path) -> None:
    proc = _cli(
        "check-adapter",
        "lifecycle_adapters:StuckDeclaring",
        cwd=tmp_path,
        HARNESS_WORKER_TIMEOUT="2",
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "did not exit within 2 s" in proc.stdout + proc.stderr
