"""Engine tests: the harness run end to end against a deliberately broken runtime.

``broken_runtime`` lives in this folder; it is put on ``sys.path`` here (the
tests import it, and so does the harness when it loads the adapter spec
``broken_runtime:BrokenAdapter``) and on ``PYTHONPATH`` for every subprocess
(``harness run``, ``pytester`` runs), which do the same in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ENGINE_DIR = Path(__file__).resolve().parent
if str(ENGINE_DIR) not in sys.path:
    sys.path.insert(0, str(ENGINE_DIR))

BROKEN = "broken_runtime:BrokenAdapter"


def subprocess_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment, with ``broken_runtime`` importable and no settings
    leaking in from the caller's ``HARNESS_*``/``CI`` variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "CI" and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ENGINE_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


def harness_cli(*args: str, cwd: Path, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run ``harness ARGS`` as a subprocess (from ``cwd``, so no pyproject applies)."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """For pytester subprocesses: ``broken_runtime`` importable, no CI profile."""
    for key, value in subprocess_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CI", raising=False)
