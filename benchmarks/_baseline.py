"""Measure an earlier commit beside this one, in the same run (``--baseline REV``).

A benchmark that takes ``--baseline REV`` runs itself as child processes,
alternating this checkout and REV's, one repetition at a time, so that a
machine busy at one moment weighs on both alike. REV's tree is extracted with
``git archive`` into a temporary folder (the shared checkout and its ``.git``
are only read), and this checkout's ``benchmarks/*.py`` are copied over its
``benchmarks/``: both sides run the same measuring code, only the harness and
the runtime differ. Each child puts its tree first on ``sys.path`` (the
scripts do, from their own location), and the fork server and its workers
inherit that path, so REV's workers run REV's code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def describe(rev: str) -> str:
    """``abc1234 subject`` of ``rev`` (exit 2 with a clear message if git does not know it)."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", rev],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        print(
            f"--baseline {rev!r}: git does not know this revision ({proc.stderr.strip()}); "
            "name a commit of this repository, e.g. --baseline HEAD~1",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return proc.stdout.strip()


@contextmanager
def baseline_tree(rev: str) -> Iterator[Path]:
    """REV's tree in a temporary folder, with this checkout's benchmarks copied in."""
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    try:
        archive = folder / "tree.tar"
        with archive.open("wb") as out:
            subprocess.run(["git", "-C", str(ROOT), "archive", rev], stdout=out, check=True)
        tree = folder / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        archive.unlink()
        (tree / "benchmarks").mkdir(exist_ok=True)
        for script in HERE.glob("*.py"):
            shutil.copy2(script, tree / "benchmarks" / script.name)
        yield tree
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_child(tree: Path, script: str, argv: list[str]) -> dict[str, Any]:
    """Run ``tree/benchmarks/script argv --json``; its last stdout line, parsed."""
    proc = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / script), *argv, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{script} in {tree} exited {proc.returncode}:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
