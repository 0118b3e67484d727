"""Engine tests: the harness run end to end against a deliberately broken runtime.

``broken_runtime`` lives in this folder; it is put on ``sys.path`` here (the
tests import it, and so does the harness when it loads the adapter spec
``broken_runtime:BrokenAdapter``) and on ``PYTHONPATH`` for every subprocess
(``harness run``, ``pytester`` runs), which do the same in a fresh interpreter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ENGINE_DIR = Path(__file__).resolve().parent
if str(ENGINE_DIR) not in sys.path:
    sys.path.insert(0, str(ENGINE_DIR))

from engine_support import subprocess_env  # noqa: E402  (needs the path above)


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """For pytester subprocesses: ``broken_runtime`` importable, no CI profile."""
    for key, value in subprocess_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CI", raising=False)
