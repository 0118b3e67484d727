"""The targeted schedules of the ``late_approval`` family: the clock past a wait's
deadline with what the run waits for withheld, and a day of downtime
between a decision and its effect; and its sampled-search episode (an
approval delivered after the clock moved past its lifetime)."""

from __future__ import annotations

from hypothesis import strategies as st

from ...adapters import Capability
from ...model import AdvanceClock, Approve, CrashSpec, RunSpec, RunWorker, Scenario, Step
from .._universe import Universe
from ._common import OUTAGE_SECONDS, _Aim, _interleave, _rounds, _run, _scenario
from ._draws import _run_ids
from ._registry import category, episode_of
from ._swarm import Swarm

#: how far the clock jumps past a waiting run: beyond any deadline a runtime
#: or a workflow sets for an event or a decision (a day and a bit)
WAIT_SECONDS = OUTAGE_SECONDS


#: wait-deadline schedules at most
MAX_WAIT_DEADLINES = 12
#: how far before a deadline the "just before" boundary sets the clock: a
#: whole second, so that a runtime keeping time in whole seconds still sees
#: the deadline ahead
JUST_BEFORE = -1.0


@category("late_approval", place=120)
def _wait_deadlines(a: _Aim) -> list[Scenario]:
    """A run left waiting while the clock passes its deadline, with what it
    waits for withheld. The worker is killed right after each commit of the
    fault-free run that hands off (the run yields and the worker's loop
    finds another run to do: the run now waits for what it handed off, a
    child's result or a message, and the other run has not yet made it),
    then the clock jumps a day; a gated run is left waiting for its
    decision while the clock jumps, and a worker runs before the decision
    comes. The runtime must time the wait out (the clock fault names the
    runs whose deadline, the ``wake_at`` they report, it passes: they may
    end otherwise than fault-free), take what came in time, or keep waiting
    without starving the run it waits on; never wait past its deadline
    for ever. Each workflow's first wait, then each one's next.

    Then the deadline's boundary (``AdvanceClock(until=...)``): the clock
    set to exactly the waiting run's own deadline, the ``wake_at`` it
    reports (the first instant it has passed: the wait must time out there,
    and a decision delivered there is expired), and for a gated run also a
    second before it with the decision delivered then (still valid: the
    run must go on as it would have). A comparison off by one (``>`` where
    ``>=`` belongs) shows only there: a woken run that finds its wait not
    yet over and is claimed again and again, an expired decision taken."""
    if "late_approval" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    groups: list[list[Scenario]] = []
    edges: list[list[Scenario]] = []
    for wf in a.workflows:
        mine: list[Scenario] = []
        boundary: list[Scenario] = []
        if "crash" in a.families and a.in_txn:
            for c in a.profile(wf).commits(a.in_txn):
                if not c.handoff or c.after is None:
                    continue
                where = f"r{c.round}/{c.last[0]}@{c.last[1]}"
                kill = RunWorker(worker_id="w1", crash=CrashSpec(site=c.after[0], nth=c.after[1]))
                mine.append(
                    _scenario(
                        f"{wf.name}/deadline_passes/{where}",
                        _run(wf),
                        *_rounds(c.round),
                        kill,
                        AdvanceClock(seconds=WAIT_SECONDS),
                    )
                )
                if not boundary:  # the first hand-off's wait, at its deadline
                    boundary.append(
                        _scenario(
                            f"{wf.name}/deadline_boundary/exact/{where}",
                            _run(wf),
                            *_rounds(c.round),
                            kill,
                            AdvanceClock(seconds=0.0, until="r1"),
                            RunWorker(worker_id="w2"),
                        )
                    )
        if wf.needs_approval:
            mine.append(
                _scenario(
                    f"{wf.name}/deadline_passes/approval",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    AdvanceClock(seconds=WAIT_SECONDS),
                    RunWorker(worker_id="w2"),
                )
            )
            boundary[:0] = [
                _scenario(
                    f"{wf.name}/deadline_boundary/exact/approval",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    AdvanceClock(seconds=0.0, until="r1"),
                    RunWorker(worker_id="w2"),
                ),
                _scenario(
                    f"{wf.name}/deadline_boundary/just_before/approval",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    AdvanceClock(seconds=JUST_BEFORE, until="r1"),
                    Approve(run_id="r1"),
                    RunWorker(worker_id="w2"),
                ),
            ]
        groups.append(mine)
        edges.append(boundary)
    # the boundaries after every deadline passed (their kind's first comes
    # early anyway: every kind's first schedule opens the plan)
    return (_interleave(groups) + _interleave(edges))[:MAX_WAIT_DEADLINES]


@category("late_approval", place=110)
def _outages(a: _Aim) -> list[Scenario]:
    """A long outage between the decision and a gated workflow's effect: the
    worker dies right before the effect, or right after the commit that
    took the decision (before anything else is written), and nothing runs
    for a day. What the decision allowed must be judged again with the
    clock as it is when the run resumes, not as of its last checkpoint."""
    if "late_approval" not in a.families:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        if not wf.needs_approval:
            continue
        p = a.profile(wf)
        out += [
            a.before(
                wf,
                es,
                RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
                AdvanceClock(seconds=OUTAGE_SECONDS),
                name=f"outage_before/{es.effect}",
            )
            for es in p.effect_sites
            if es.round >= p.resume_round
        ]
        decided = p.commit_kinds(a.in_txn, gated=True)["decision"]
        if decided and decided[0].after is not None:
            site, n = decided[0].after
            out.append(
                _scenario(
                    f"{wf.name}/outage_after/decision_commit",
                    _run(wf),
                    *_rounds(decided[0].round),
                    RunWorker(worker_id="w1", crash=CrashSpec(site=site, nth=n)),
                    AdvanceClock(seconds=OUTAGE_SECONDS),
                )
            )
    return out


@episode_of("late_approval")
def _late_approval_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return [
        RunWorker(worker_id=f"w{n}"),
        AdvanceClock(seconds=draw(st.sampled_from((600.0, 4000.0)))),
        Approve(run_id=draw(st.sampled_from(_run_ids(runs)))),
    ]
