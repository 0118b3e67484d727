"""``harness run --jobs N``: one search in N processes of this machine.

The N jobs are the N shards of the search's plan (``--shard K/N``). Job 1
is the harness process itself: it runs its share in process, after its
probe (below). Jobs 2..N are harness processes of their own (``python -m
harness._job``), each with its own fork server, deployments and scratch
folder. Each job runs its shard into a folder of its own, job 1 as the
others do; the parent streams the other jobs' progress (between its own
scenarios, then until they end), then merges the N folders into the one
report folder (:func:`harness.report.merge_reports`). N jobs thus cost
N - 1 extra processes: one interpreter start, one fork server and one
adapter load fewer than N processes would.
The plan is the unsharded search's, whatever N: every shard plans the same
targeted list and draws the same sampled stream from the one seed (the
parent draws it when none is fixed). Which job runs which of the plan's
scenarios is not fixed in advance, as ``--shard K/N`` across machines fixes
it (``harness.session._plan.shard_plan``): the jobs take them one at a
time, by their index in the plan, from a queue in the run's scratch folder
(``harness.session._shared.PlanQueue``), so a job that gets cheaper
scenarios or a less busy core runs more, and the jobs end together. The
merge sums the evidence and judges the verdicts again by a single run's
rules. Each scenario's history is the one a single process records
(scenarios are deterministic: the ``race`` family excepted), whichever job
ran it. A failure is shrunk in the job that found it. The budget is the
run's: a job that finds it spent takes what is left of the plan, which
then no job runs (that job's report names what did not run).

What every job would do alike before its search is done once, by the
parent, while the other jobs start (``Session.run_share``, before its
share): the fault-free probe and the universe (site profiles), which the
jobs wait for and read from the run's scratch folder. The fault-free
oracle runs are shared there too (``harness.session._shared``): a job
checks against one another job (or the probe) already ran instead of
running it again.

The parent owns its jobs: they run in sessions of their own (a terminal's
Ctrl-C reaches the parent only), and a SIGINT or SIGTERM of the parent
stops its own share (which writes its partial report, as a job does) and
is passed on to each job once; each stops, cleans up and writes a partial
report, which the parent merges, marked interrupted. A job that dies
without a report (killed, out of memory) leaves its part of the plan out
of the merge, which is then inconclusive, naming it: never passed (job 1
too, if a signal stopped it before its first scenario). A job refusing
its settings or adapter (exit 2) stops the others, the parent's share
(at its next scenario) and the run with its message; the parent's share
refusing them (it loads the adapter first) stops the run the same way.
``--stop-on-first`` and a spent budget stop every job through the queue
(the job that stops takes what is left of the plan).

No job is waited for without a bound. Once the parent's share has ended,
a job that sends nothing (no progress, no notice) for longer than
:func:`silence_limit` allows is killed and named: a job stopped (SIGSTOP),
hung in its adapter or deadlocked. Its part of the plan is then missing
from the merge, which is inconclusive (exit 3) and says which job and why.
The limit comes from the budget and from what the run took so far: a
whole run may last ``--budget`` plus its shrink budget
(``harness.session._plan.shrink_deadline``), and on top of that a job
gets as long as the parent's own share took (this adapter's setup, probe,
search and report, on this machine, now): time to finish the scenario in
hand, shrink and write its report. A job's notices and progress come at
least when its search starts (the seed it plans from) and after every
scenario, and its search started before the parent's share ended (the jobs
share one plan queue and one budget), so a healthy job is never that
silent. (A job whose adapter ``setup()`` alone takes longer than that is
called stuck too.)

The wire between the parent and jobs 2..N is one JSON object per line on
the job's stdout: ``{"log": TEXT}`` (a notice; the parent prints its own
share's, not theirs), ``{"progress": {...}}`` (after every scenario:
:func:`progress_message`) and ``{"error": TEXT}`` (why it exits 2).
Anything else a job prints there is passed on as a notice.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

from ._errors import Interrupted, UsageError
from ._janitor import remove_scratch, scratch_dir
from ._settings import Settings
from ._signals import blocked_in_children, shielded
from .model import Scenario
from .outcome import Outcome
from .outcome._verdicts import Tally
from .report import Report, claim_report_folder, merge_reports

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
    from .session._plan import shrink_seconds

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


def _child_env() -> dict[str, str]:
    """This environment, with this process's import path (an adapter spec
    the parent can import, from a test folder pytest put on ``sys.path``,
    the jobs can too)."""
    # What the parent resolved it passes itself: a job must not read the
    # example database again (it would replay its scenarios twice), nor
    # split itself into jobs.
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_EXAMPLE_DB", "HARNESS_JOBS")}
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class _Job:
    """Job ``k`` of ``n`` (2..N): a process of its own."""

    def __init__(self, k: int, n: int, folder: Path, args: dict[str, Any]) -> None:
        self.k, self.n, self.folder = k, n, folder
        # Started with SIGINT and SIGTERM blocked: one passed on while it
        # starts waits for its handler (harness._job), never a traceback.
        with blocked_in_children():
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness._job", json.dumps(args)],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=_child_env(),
                # A terminal's Ctrl-C reaches the parent only: it passes the
                # signal on once (two would make a job exit without cleaning up).
                start_new_session=True,
            )
        self.progress: dict[str, Any] | None = None
        self.error: str | None = None
        self.signalled = False
        #: its output has ended (the reader thread said so)
        self.ended = False
        #: when the parent last heard from it (monotonic seconds)
        self.heard = time.monotonic()
        #: how long it had been silent when it was killed as stuck
        self.stuck: tuple[float, float] | None = None

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None and not self.signalled:
            self.signalled = True
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
                # a job someone stopped (SIGSTOP) must run to act on it
                self.proc.send_signal(signal.SIGCONT)

    def kill_stuck(self, silent: float, limit: float) -> None:
        """Kill this job, silent for ``silent`` seconds, over ``limit``."""
        self.stuck = (silent, limit)
        self.kill()
        self.proc.wait()
        # What it started may still hold its output open: nothing it could
        # say now counts, so its output has ended for the parent.
        self.ended = True

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def died(self) -> str | None:
        """Why this job left no report (None: it wrote one)."""
        if (self.folder / "report.json").is_file():
            return None
        if self.stuck is not None:
            silent, limit = self.stuck
            return (
                f"job {self.k} of {self.n} sent nothing for {silent:.0f} s, longer than a job "
                f"may ({limit:.0f} s: the budget and shrink budget of a whole run, plus as long "
                "as this process's own share took), and was killed: its part of the plan was not "
                "run to the end, and is not judged here"
            )
        code = self.proc.returncode
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code is not None and code < 0 and -code in signal.valid_signals()
            else f"exited with code {code}"
        )
        return (
            f"job {self.k} of {self.n} {how} before writing its report: its part of the plan "
            "was not run to the end, and is not judged here"
        )


class _Own:
    """Job 1: the parent's own share, run in this process."""

    def __init__(self, n: int, folder: Path) -> None:
        self.k, self.n, self.folder = 1, n, folder
        self.progress: dict[str, Any] | None = None
        #: its share is running (a refusal from another job stops it)
        self.running = False

    def died(self) -> str | None:
        """Why the share left no report (None: it wrote one): a signal
        stopped it before its first scenario."""
        if (self.folder / "report.json").is_file():
            return None
        return (
            f"job 1 of {self.n} (the harness process itself) was stopped before writing its "
            "report: its part of the plan was not run to the end, and is not judged here"
        )


class _Refused(Interrupted):
    """Stops the parent's share when another job refused the run (exit 2):
    an :class:`Interrupted`, so that nothing absorbs it on the way out."""


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


def _read(job: _Job, out: IO[bytes], inbox: queue.Queue[tuple[_Job, Any]]) -> None:
    """Pass job's wire messages to the parent's main thread; None at the end."""
    for raw in out:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            message = {"log": f"job {job.k}: {line}"}
        inbox.put((job, message))
    inbox.put((job, None))


def _snapshot(parts: Sequence[_Job | _Own], settings: Settings, seed: int, planned: int) -> Outcome:
    """The jobs' progress so far, summed, as the one Outcome a progress
    display reads (scenarios run and planned, the slowest, faults fired,
    properties failing)."""
    outcome = Outcome(adapter="", adapter_options={}, capabilities=[], settings=settings, seed=seed)
    outcome.planned = planned
    for part in parts:
        p = part.progress or {}
        outcome.examples += int(p.get("examples", 0))
        outcome.searched += int(p.get("searched", 0))
        outcome.slowest = max(outcome.slowest, float(p.get("slowest", 0.0)))
        outcome.faults_fired.update(Counter(p.get("faults_fired", {})))
        for name in p.get("failing", []):
            outcome.tallies.setdefault(str(name), Tally()).failed += 1
    return outcome


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


def _wait(jobs: Sequence[_Job], seconds: float) -> None:
    for job in jobs:
        try:
            job.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            job.kill()
            job.proc.wait()


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
