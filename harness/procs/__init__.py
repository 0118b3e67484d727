"""Processes: the bottom layer, below both the runner and the adapters.

It imports nothing else of the harness, so the runner (which drives workers)
and the adapters (which start them) can both use it without importing each
other. Worker processes come from a :class:`Spawner`: :class:`ForkServer`
(fork per worker after preloading, the fast path) or :class:`DirectSpawner`
(a fresh interpreter per worker). A :class:`Worker` handle kills, stops, continues and
waits; how a worker ended is an :class:`Exit`, a stop is :class:`Stopped`.
Errors derive from :class:`RunnerError` (tree in ``_errors``).
"""

from __future__ import annotations

from harness.procs._direct import DirectSpawner
from harness.procs._errors import (
    PreloadError,
    RunnerError,
    SpawnerClosed,
    SpawnerLost,
    TargetError,
    WorkerTimeout,
)
from harness.procs._procs import ForkServer, Spawner
from harness.procs._worker import Exit, Stopped, Worker

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
