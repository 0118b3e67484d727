"""The runner: the only part of the harness that owns processes, time and ordering.

Worker processes come from a :class:`Spawner`: :class:`ForkServer` (fork per
worker after preloading, the fast path) or :class:`DirectSpawner` (a fresh
interpreter per worker). A :class:`Worker` handle kills, stops, continues and
waits; how a worker ended is an :class:`Exit`, a stop is :class:`Stopped`.
Errors derive from :class:`RunnerError` (tree in ``_errors``).
"""

from __future__ import annotations

from harness.runner._direct import DirectSpawner
from harness.runner._errors import (
    PreloadError,
    RunnerError,
    SpawnerClosed,
    SpawnerLost,
    TargetError,
    WorkerTimeout,
)
from harness.runner._procs import ForkServer, Spawner
from harness.runner._worker import Exit, Stopped, Worker

__all__ = [
    "DirectSpawner",
    "Exit",
    "ForkServer",
    "PreloadError",
    "RunnerError",
    "Spawner",
    "SpawnerClosed",
    "SpawnerLost",
    "Stopped",
    "TargetError",
    "Worker",
    "WorkerTimeout",
]
