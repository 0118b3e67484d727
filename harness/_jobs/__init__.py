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
from ._run import run_jobs

__all__ = [
    "STOP_SECONDS",
    "Log",
    "Share",
    "job_args",
    "job_seed",
    "job_settings",
    "progress_message",
    "run_jobs",
    "silence_limit",
]
