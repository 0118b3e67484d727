"""The parent's side of ``--jobs N``: :func:`run_jobs` starts jobs 2..N,
runs job 1's share in process, follows the jobs' progress with a bound on
their silence, passes a signal on, and merges their folders into one report."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import Interrupted, UsageError
from .._janitor import remove_scratch, scratch_dir
from .._settings import Settings
from .._signals import shielded
from ..model import Scenario
from ..outcome import Draft, Outcome
from ..outcome._verdicts import Tally
from ..report import Report, claim_report_folder, merge_reports
from ._args import (
    STOP_SECONDS,
    Log,
    Share,
    job_args,
    job_seed,
    job_settings,
    progress_message,
    silence_limit,
)
from ._children import _Job, _Own, _read, _Refused, _wait


def _snapshot(parts: Sequence[_Job | _Own], settings: Settings, seed: int, planned: int) -> Outcome:
    """The jobs' progress so far, summed, as the one Outcome a progress
    display reads (scenarios run and planned, the slowest, faults fired,
    properties failing)."""
    outcome = Draft(adapter="", adapter_options={}, capabilities=[], settings=settings, seed=seed)
    outcome.planned = planned
    for part in parts:
        p = part.progress or {}
        outcome.examples += int(p.get("examples", 0))
        outcome.searched += int(p.get("searched", 0))
        outcome.slowest = max(outcome.slowest, float(p.get("slowest", 0.0)))
        outcome.faults_fired.update(Counter(p.get("faults_fired", {})))
        for name in p.get("failing", []):
            outcome.tallies.setdefault(str(name), Tally()).failed += 1
    return outcome.freeze()


def run_jobs(
    *,
    spec: str,
    options: Mapping[str, str],
    settings: Settings,
    n: int,
    share: Share,
    regressions: Sequence[Scenario] = (),
    log: Log | None = None,
    progress: Callable[[Outcome], None] | None = None,
    properties: Sequence[str] = (),
) -> Report:
    """Run the search ``settings`` describe in ``n`` jobs (shards 1..n of
    its plan) and merge them into ``settings.report_dir``; returns the
    merged report. ``properties``: the specs of the invariants given to
    the run, which every job imports. ``regressions`` run first, as ``--scenario`` files do
    (every job gets them all: the plan splits them). Job 1 is ``share``
    (:data:`Share`), run in this process while jobs 2..n start: it
    probes, once for every job (they wait for it), then runs its share.
    Raises :class:`UsageError` when a job refuses the run (and what
    ``share`` raises when it does), :class:`Interrupted` (with the partial
    merged report) on a signal."""
    say = log or (lambda _line: None)
    report_dir = Path(settings.report_dir)
    claim_report_folder(report_dir)  # refused now (exit 2), not after the search
    seed = job_seed(settings)
    planned = settings.max_examples + len(regressions)
    started = time.monotonic()
    scratch = scratch_dir("jobs")
    own = _Own(n, scratch / "shard-1")
    jobs: list[_Job] = []
    inbox: queue.Queue[tuple[_Job, Any]] = queue.Queue()
    interrupted: Interrupted | None = None
    try:
        say(
            f"harness: {n} jobs, running shard K/{n} of the plan each (seed {seed}): this "
            f"process and {n - 1} more, merged into {report_dir}"
        )
        files = []
        for i, scenario in enumerate(regressions, 1):
            files.append(scratch / f"regression-{i:05d}.json")
            files[-1].write_text(scenario.model_dump_json(indent=2))
        prepared = scratch / "prepared"
        prepared.mkdir()
        # The plan's scenarios go to whichever job is ready for one first.
        plan_queue = scratch / "plan.queue"
        plan_queue.touch()
        for k in range(2, n + 1):
            folder = scratch / f"shard-{k}"
            args = job_args(spec, options, settings, seed, files, (k, n), folder)
            args["prepared"] = str(prepared)
            args["parent"] = os.getpid()
            args["queue"] = str(plan_queue)
            args["properties"] = list(properties)  # the user's invariants, by spec
            # Shielded: a signal held while the job started (blocked_in_children)
            # is raised once the job is in ``jobs``, which the way out stops.
            with shielded():
                job = _Job(k, n, folder, args)
                jobs.append(job)
                assert job.proc.stdout is not None
                reader = threading.Thread(target=_read, args=(job, job.proc.stdout, inbox))
                reader.daemon = True
                reader.start()
        parts: list[_Job | _Own] = [own, *jobs]

        def handle(job: _Job, message: Any) -> None:
            """One message of a job: its progress passed on (summed), its
            notice printed if meant for the user, its refusal stopping the
            other jobs."""
            job.heard = time.monotonic()
            if message is None:
                job.ended = True
            elif "progress" in message:
                job.progress = message["progress"]
                if progress is not None:
                    progress(_snapshot(parts, settings, seed, planned))
            elif "error" in message:
                job.error = str(message["error"])
                for other in jobs:
                    other.signal(signal.SIGTERM)
            elif "log" in message and str(message["log"]).startswith("job "):
                say(str(message["log"]))

        def own_progress(outcome: Outcome) -> None:
            # Between the share's scenarios, in this (the main) thread: the
            # other jobs' messages so far, then the sum with this one's.
            while True:
                try:
                    job, message = inbox.get_nowait()
                except queue.Empty:
                    break
                handle(job, message)
            own.progress = progress_message(outcome)
            if progress is not None:
                progress(_snapshot(parts, settings, seed, planned))
            if own.running and any(job.error is not None for job in jobs):
                own.running = False
                raise _Refused(signal.SIGTERM)

        try:
            mine = job_settings(job_args(spec, options, settings, seed, files, (1, n), own.folder))
            own.running = True
            with contextlib.suppress(_Refused):  # another job refused the run: said below
                share(mine, files, prepared, plan_queue, say, own_progress)
            own.running = False
            _follow(jobs, inbox, handle, silence_limit(settings, time.monotonic() - started))
        except Interrupted as exc:
            interrupted = exc
            for job in jobs:
                job.signal(exc.signum)
            with shielded():
                _wait(jobs, STOP_SECONDS)
        refused = next((job for job in jobs if job.error is not None), None)
        if refused is not None and interrupted is None:
            raise UsageError(str(refused.error))
        with shielded():
            report = _merge(parts, report_dir, required=interrupted is None, started=started)
        if interrupted is not None:
            interrupted.report = report
            raise interrupted
        assert report is not None
        return report
    finally:
        with shielded():
            for job in jobs:
                job.kill()
            _wait(jobs, STOP_SECONDS)
            remove_scratch(scratch)


def _follow(
    jobs: Sequence[_Job],
    inbox: queue.Queue[tuple[_Job, Any]],
    handle: Callable[[_Job, Any], None],
    limit: float,
) -> None:
    """Until every job's output has ended: ``handle`` their messages, and
    kill a job that has sent nothing for ``limit`` seconds (counted from
    now at the latest: the parent's share has just ended; see
    :func:`silence_limit`)."""
    since = time.monotonic()
    while not all(job.ended for job in jobs):
        try:
            # A timeout, so that a signal's Interrupted is raised here promptly.
            job, message = inbox.get(timeout=0.5)
        except queue.Empty:
            now = time.monotonic()
            for job in jobs:
                silent = now - max(job.heard, since)
                if not job.ended and job.stuck is None and silent > limit:
                    job.kill_stuck(now - job.heard, limit)
            continue
        handle(job, message)
    _wait(jobs, STOP_SECONDS)


def _merge(
    parts: Sequence[_Job | _Own], report_dir: Path, *, required: bool, started: float
) -> Report | None:
    """The jobs' reports merged into ``report_dir``; None when no job wrote
    one and none is ``required`` (a signal stopped them all first)."""
    why = {part.k: reason for part in parts if (reason := part.died()) is not None}
    folders = [part.folder for part in parts if part.k not in why]
    if not folders and not required:
        return None
    if not folders:
        raise UsageError(
            f"none of the {len(parts)} jobs wrote a report ({'; '.join(why.values())}): "
            "nothing to merge; run again with --jobs 1 to see the error in this process"
        )
    return merge_reports(
        folders,
        report_dir,
        partial=True,
        why_missing=why,
        duration=time.monotonic() - started,
    )
