"""The package's public surface: curated, typed, and independent of any runtime."""

from __future__ import annotations

import subprocess
import sys

import harness.world
from harness.world import NotSupported, Rejected, Unknown, WorldError, WorldUsageError


def test_all_is_sorted_and_names_exactly_the_public_objects() -> None:
    # "@py_..." names are pytest's assertion rewriting (harness is a pytest
    # plugin, so pytest rewrites its modules), not the package's API.
    public = {n for n in vars(harness.world) if not n.startswith(("_", "@"))} - {"annotations"}
    assert harness.world.__all__ == sorted(
        harness.world.__all__, key=lambda n: (not n.isupper(), n)
    )
    assert set(harness.world.__all__) == public


def test_every_world_error_shares_one_root_and_the_builtin_it_models() -> None:
    assert all(
        issubclass(e, WorldError) for e in (Rejected, Unknown, NotSupported, WorldUsageError)
    )
    assert issubclass(Unknown, TimeoutError)
    assert issubclass(NotSupported, NotImplementedError)
    assert issubclass(WorldUsageError, ValueError)
    assert not issubclass(Rejected, Unknown) and not issubclass(Unknown, Rejected)


def test_the_world_imports_no_runtime() -> None:
    code = (
        "import sys, harness.world; "
        "bad = [m for m in sys.modules if m.startswith(('reference_runtime', 'langgraph'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
