"""Report tests: one real failing run of the broken runtime (tests/engine),
shared by the whole folder, plus a short passing run of the reference runtime."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"
if str(ENGINE_DIR) not in sys.path:
    sys.path.insert(0, str(ENGINE_DIR))

from engine_support import harness_cli  # noqa: E402  (needs the path above)


@pytest.fixture(scope="session")
def failing_run(
    broken_ci_run: tuple[subprocess.CompletedProcess[str], Path],
) -> tuple[Path, str]:
    """The folder of a ``harness run`` of the broken runtime (it fails
    exactly_once_effects), and its stdout (tests/conftest.py: one run)."""
    proc, folder = broken_ci_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return folder, proc.stdout


@pytest.fixture
def run_copy(failing_run: tuple[Path, str], tmp_path: Path) -> Path:
    """A private copy of the failing run folder, free to damage."""
    dest = tmp_path / "run"
    shutil.copytree(failing_run[0], dest)
    return dest


@pytest.fixture(scope="session")
def passing_run(
    made_once: Callable[..., tuple[subprocess.CompletedProcess[str], Path]],
) -> Path:
    """The folder of a short passing run of the reference runtime (it has crash points,
    and every property was exercised: exit 0), made once per session."""

    def make(folder: Path) -> subprocess.CompletedProcess[str]:
        return harness_cli(
            "run", "--adapter", "reference", "--profile", "dev", "--seed", "7",
            # The targeted schedules earn every property a pass (a short sampled
            # run would leave memory_safety unexercised: inconclusive); the rest
            # are sampled, with crash points among them.
            "--max-examples", "20", "--report-dir", str(folder), cwd=folder,
        )  # fmt: skip

    proc, folder = made_once("passing-run", make)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """For pytester subprocesses: ``broken_runtime`` importable, no CI profile."""
    from engine_support import subprocess_env

    for key, value in subprocess_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CI", raising=False)
