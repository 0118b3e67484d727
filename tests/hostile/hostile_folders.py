"""Report folders built by hand for the hostile-input tests of the report
folder and of artifact readers (issue 27): small, valid, written in
milliseconds, then damaged by each test as an attacker would.

``harness`` is driven as a user drives it: :func:`cli` runs it as a
subprocess (with a timeout: a hang is a failure, not a stuck suite, and a
memory cap: reading ``/dev/zero`` fails fast), :func:`main_cli` in-process.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import harness
from harness.cli import main
from harness.report._schema import (
    AdapterInfo,
    Counterexample,
    PropertyReport,
    Report,
    ShardInfo,
)

#: the checkout whose harness the tests import (its parent on PYTHONPATH
#: makes a subprocess run the same code)
SOURCE = Path(harness.__file__).resolve().parents[1]
#: no subprocess of these tests may take more memory than this
MEMORY_CAP = 2 * 1024**3


def report(
    *,
    shard: tuple[int, int] | None = None,
    properties: int = 1,
    steps: int = 2,
    profile: str = "dev",
) -> Report:
    """A failing report of the reference adapter: ``properties`` failed
    properties served by one counterexample of ``steps`` steps."""
    names = [f"prop_{i}" for i in range(properties)]
    return Report(
        verdict="fail",
        seed=0,
        profile=profile,
        adapter=AdapterInfo(
            spec="reference", options={}, name="reference", description={}, capabilities=[]
        ),
        duration_seconds=1.0,
        scenarios=1,
        properties=[
            PropertyReport(
                name=n, verdict="fail", message="lost", witness=[], counts={}, scenarios=1,
                exercised=1, failed=1,
            )
            for n in names
        ],
        other_failures=[],
        faults={},
        crash_points={},
        absorbed_duplicates=0,
        not_tested=[],
        counterexample=Counterexample(
            steps=[f"submit refund run r{i} for acme" for i in range(steps)],
            failed_properties=names,
            counterexample_for=names,
            replay="harness replay .",
        ),
        shard=None if shard is None else ShardInfo(k=shard[0], n=shard[1], plan=2),
    )


def raw_folder(path: Path, raw: dict[str, Any], **files: str) -> Path:
    """A run folder as an older harness or a CI artifact holds it:
    ``report.json`` (``raw``, written as is: NaN too) and ``files``."""
    path.mkdir(parents=True)
    (path / "report.json").write_text(json.dumps(raw))
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def folder(path: Path, rep: Report | None = None, **files: str) -> Path:
    """``raw_folder`` of ``rep`` (default :func:`report`)."""
    return raw_folder(path, (rep or report()).model_dump(mode="json"), **files)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(
    *args: str, cwd: Path, timeout: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` as a subprocess, under a memory cap; a hang past
    ``timeout`` raises :class:`subprocess.TimeoutExpired` (the test fails)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(SOURCE), full.get("PYTHONPATH", "")])
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=_limits,
    )


def main_cli(*args: str) -> tuple[int, str, str]:
    """``harness ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = main(list(args), out=out)
    finally:
        sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def tree(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (links not followed), by path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
