"""Fault-free oracle histories shared by the jobs of one run (``--jobs N``).

Every job of ``harness run --jobs N`` checks its scenarios against the same
fault-free runs: the probe's (one per workflow, run once by the parent
before the jobs search) and the search's (the targeted schedules of one
workload go to every shard). A :class:`SharedOracles` folder, in the run's
scratch folder, holds each one computed so far under its cache key (what
runs, see ``_engine._key``): a job looks there before it runs one, and
puts there what it ran. A fault-free run is deterministic, so whichever
job ran it, the history is the one this job would have recorded.

Two jobs that need one at the same moment both run it (the second write
replaces the first, atomically, with the same history): nothing waits on
another process, so a job that dies never blocks the others.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


class SharedOracles:
    """A folder of fault-free histories by cache key, shared between processes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()}.jsonl"

    def get(self, key: str) -> Path | None:
        """The history kept under ``key``, if a process put one there."""
        path = self._path(key)
        return path if path.is_file() else None

    def put(self, key: str, history: Path) -> None:
        """Keep a copy of ``history`` under ``key`` (written whole, then
        renamed: a reader never sees half of it)."""
        path = self._path(key)
        pending = path.with_name(f".{path.name}.{os.getpid()}")
        shutil.copyfile(history, pending)
        os.replace(pending, path)
