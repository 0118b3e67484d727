"""``harness run``: the front door (:func:`harness.run`) with its progress
on the terminal (a bar) or in a CI log (a line every 25 scenarios), then
the run's summary."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .. import _api as api
from .._settings import flag_values
from ..adapters._loading import parse_opts
from ..outcome import Outcome
from ._output import _count, _duration, _line, _step_summary, _summary, exit_code


def run(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness run``: the front door (:func:`harness.run`) with progress on
    ``out``, then the summary; the exit code of the verdict."""
    progress = _Progress(out)
    with progress:
        report = api.run(
            ns.adapter,
            options=parse_opts(ns.adapter_opt),
            exhaustive=ns.exhaustive,
            scenarios=ns.scenarios,
            properties=getattr(ns, "properties", None) or (),
            log=progress.log,
            progress=progress.update,
            # every setting's flag, by its field's name (None: not given)
            **flag_values(ns),
        )
    report_dir = report.folder or Path(".")
    # The progress lines count from the command's start: the summary says
    # that time too, beside the search's own (the two disagreed, unexplained).
    wall = max(progress.clock() - progress.started, 0.0)
    _summary(out, report, report_dir, wall=wall)
    _step_summary(report_dir)
    return exit_code(report.verdict)


class _Progress:
    """Progress of a run. On a terminal, a rich progress bar (scenarios run of
    planned, the time left at this pace, faults fired, properties failing so
    far); otherwise quiet, line-oriented output for CI logs: every 25
    scenarios, and at once when a property starts failing, each line with the
    time elapsed and left."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.clock = clock
        self.started = clock()
        #: when the first scenario was shown, and how many had run: the pace
        #: is measured from there (before it, loading the adapter and the
        #: fault-free probe took their time: a first ETA of 25 min for a
        #: 2 min run)
        self.first: tuple[float, int] | None = None
        self.failing: list[str] = []
        self.bar: Any = None
        self.task: Any = None
        if _isatty(out):
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("harness"),
                BarColumn(bar_width=10),
                MofNCompleteColumn(),
                # the time left at this pace (mm:ss), within the plan
                TimeRemainingColumn(compact=True),
                TextColumn("{task.fields[faults]} fired"),
                TextColumn("[red]{task.fields[failing]}"),
                console=Console(file=out),
                transient=True,
            )
            self.task = self.bar.add_task("run", total=None, faults="0 faults", failing="")

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def log(self, text: str) -> None:
        """One notice line of the run (above the bar, on a terminal)."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            _line(self.out, text)

    def update(self, o: Outcome) -> None:
        """Show ``o`` after one more scenario."""
        failing = sorted(n for n, t in o.tallies.items() if t.failed)
        fired = sum(o.faults_fired.values())
        if self.bar is not None:
            # Shrinking runs past the plan: let the bar grow rather than overflow.
            total = None if o.planned is None else max(o.planned, o.examples)
            self.bar.update(
                self.task,
                completed=o.examples,
                total=total,
                faults=_count(fired, "fault"),
                failing=("failing: " + ", ".join(failing)) if failing else "",
            )
            return
        if o.examples % 25 and o.examples != 1 and failing == self.failing:
            return
        self.failing = failing
        of = f" of {o.planned}" if o.planned and o.examples <= o.planned else ""
        _line(
            self.out,
            f"harness: scenario {o.examples}{of} ({self._times(o)}slowest {o.slowest:.1f} s): "
            f"{_count(fired, 'fault')} fired"
            + (f"; failing: {', '.join(failing)}" if failing else ""),
        )

    def _times(self, o: Outcome) -> str:
        """Elapsed time and, within the plan, the time left at this pace (a
        plan that a failure cuts short, or shrinking, changes it)."""
        now = self.clock()
        elapsed = max(now - self.started, 0.0)
        text = f"{_duration(elapsed)} elapsed"
        if self.first is None:
            self.first = (now, o.examples)
        since, then = self.first
        if o.planned and then < o.examples < o.planned:
            left = max(now - since, 0.0) / (o.examples - then) * (o.planned - o.examples)
            text += f", about {_duration(left)} left"
        return text + "; "


def _isatty(out: TextIO) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False
