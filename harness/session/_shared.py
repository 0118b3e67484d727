"""What the jobs of one run (``--jobs N``) share: fault-free oracle
histories, and the plan's next scenario.

Every job of ``harness run --jobs N`` checks its scenarios against the same
fault-free runs: the probe's (one per workflow, run once by the parent
before the jobs search) and the search's (the targeted schedules of one
workload go to every shard). A :class:`SharedOracles` folder, in the run's
scratch folder, holds each one computed so far under its cache key (what
runs, see ``_executor.scenario_key``): a job looks there before it runs one, and
puts there what it ran. A fault-free run is deterministic, so whichever
job ran it, the history is the one this job would have recorded.

Two jobs that need one at the same moment both run it (the second write
replaces the first, atomically, with the same history): nothing waits on
another process, so a job that dies never blocks the others.

A :class:`PlanQueue` hands out the plan's scenarios by index, one at a
time, to whichever job asks first: a job that is quicker (cheaper
scenarios, a less busy core) runs more of them, and the jobs end together.
"""

from __future__ import annotations

import fcntl
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


class PlanQueue:
    """The next index of one search's plan (regressions, targeted
    schedules, then the sampled stream, as one process runs them), shared
    by the jobs of the run: a counter in a file, taken under ``flock``
    (which the kernel releases when its holder dies, however it dies: a
    job killed while taking one never blocks the others)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch(exist_ok=True)

    def take(self, floor: int = 0) -> tuple[int, int]:
        """Take the next index, or, if that is below ``floor``, every index
        up to ``floor`` and then ``floor`` itself: returns ``(first,
        taken)``, the indices ``first..taken-1`` skipped (no job runs
        them: the caller says so) and ``taken`` this caller's to run."""
        with open(self.path, "r+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released by close, or by death
            text = fh.read().strip()
            first = int(text) if text else 0
            taken = max(first, floor)
            # One fixed-width write: a job killed here leaves the old count
            # or the new one, never a mix of the two.
            os.pwrite(fh.fileno(), f"{taken + 1:020d}".encode(), 0)
            return first, taken
