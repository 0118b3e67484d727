"""What the parent hands a job and reads back: its arguments and settings,
its seed, the bound on its silence, and a progress message."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from .._settings import Settings
from ..outcome import Outcome
from ..report import Report

Log = Callable[[str], None]


#: job 1 of a run, in the parent's process (``harness._api``): given its
#: settings (as :func:`job_settings` makes a job's), the regression files,
#: the folder to prepare (the probe, for every job) and the plan queue's
#: file, it probes, runs its share into ``settings.report_dir`` with these
#: notices and progress, and returns its report (raising what a run raises)
Share = Callable[[Settings, Sequence[Path], Path, Path, Log, Callable[[Outcome], None]], Report]


#: how long jobs get to stop, clean up and write their partial report
#: after the parent passed a signal on, before they are killed
STOP_SECONDS = 60.0


def silence_limit(settings: Settings, share_seconds: float) -> float:
    """How long a job may send nothing, once the parent's share has ended
    (after ``share_seconds``: the parent's start, setup, probe, search and
    report), before it is called stuck and killed: the longest a run may
    last (``--budget`` plus its shrink budget) plus ``share_seconds``, as
    long as this adapter on this machine took to do what a job still may
    (finish a scenario, shrink, write its report). ``--budget 90`` and a
    share of 100 s: 212.5 s. A tiny budget (``--budget 0.001``) still
    leaves a job the parent's own time."""
    from ..session._plan import shrink_seconds

    return settings.budget_seconds + shrink_seconds(settings) + share_seconds


def job_seed(settings: Settings) -> int:
    """The seed every job plans from: the fixed one, or one drawn now."""
    if settings.seed is not None:
        return settings.seed
    if settings.derandomize:
        return 0
    return random.SystemRandom().randrange(2**32)


def job_args(
    spec: str,
    options: Mapping[str, str],
    settings: Settings,
    seed: int,
    scenarios: Sequence[Path],
    shard: tuple[int, int],
    folder: Path,
) -> dict[str, Any]:
    """What job ``shard`` of a run is started with (``python -m
    harness._job ARGS``): the parent's settings, every one of them (a job
    must search exactly as the parent was asked to: a setting left out here
    would silently take its default there), but for its seed (drawn once),
    its shard, one job, its own report folder and no example database (the
    parent read it: its scenarios are in ``scenarios``)."""
    mine = settings.with_(seed=seed, shard=shard, jobs=1, report_dir=str(folder), example_db=None)
    return {
        "adapter": spec,
        "options": dict(options),
        "settings": {f.name: getattr(mine, f.name) for f in fields(Settings)},
        "scenarios": [str(f) for f in scenarios],
        "shard": list(shard),
    }


def job_settings(args: Mapping[str, Any]) -> Settings:
    """The :class:`Settings` a job runs with, from its ``args``
    (:func:`job_args`)."""
    given = dict(args["settings"])
    for name, value in given.items():
        if isinstance(value, list):  # JSON has no tuples
            given[name] = tuple(value)
    return Settings(**given)


def progress_message(o: Outcome) -> dict[str, Any]:
    """A job's progress after a scenario, as the wire carries it (and as
    :func:`_snapshot` sums it)."""
    return {
        "examples": o.examples,
        "searched": o.searched,
        "planned": o.planned,
        "slowest": o.slowest,
        "faults_fired": dict(o.faults_fired),
        "failing": sorted(n for n, t in o.tallies.items() if t.failed),
    }
