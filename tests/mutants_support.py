"""``benchmarks/_mutants.py``, the mechanism that copies the reference
runtime, edits it and runs one scenario on the copy, for the tests that
hold a hand-written mistake against a schedule. ``benchmarks/`` is a folder
of scripts, not a package, so it is loaded by path, once, under a name of
its own. Imported by its basename, as ``scenario_support`` is."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "benchmarks_mutants"


def load_mutants() -> ModuleType:
    """The ``benchmarks/_mutants.py`` module (loaded on the first call)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "_mutants.py"
    spec = importlib.util.spec_from_file_location(NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
