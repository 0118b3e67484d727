"""The targeted schedules of the ``crash`` and ``race`` families aimed at commits:
kills inside and right after each commit, the last window before a run ends,
workers released together from a barrier, a kill right before each effect;
and the two families' sampled-search episodes (kills at crash points, then
during recovery; two workers racing through a slowed effect)."""

from __future__ import annotations

from hypothesis import strategies as st

from ...adapters import Capability
from ...model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    CrashSpec,
    RaceWorkers,
    ReleaseWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
)
from .._universe import Universe
from ._common import _Aim, _interleave, _kill_after, _paused, _rounds, _run, _scenario
from ._draws import _approved_first, _crash, _effects, _run_ids
from ._registry import category, episode_of, sweep
from ._swarm import Swarm

#: in-transaction sites of the first commit after a decision, aimed at first
MAX_TXN_SITES = 8


#: kills right after a commit at most (hand-offs first)
MAX_COMMIT_KILLS = 30


def _commit_sweeps(a: _Aim) -> tuple[list[Scenario], list[Scenario]]:
    """A kill inside the first commit after the decision (or the first commit
    of all, with none), statement by statement. Returned in two parts, each
    across workflows: the first and last statements (a commit split in two
    shows at one of its ends), both ends of one commit before the next
    workflow's; then the middle ones, interleaved."""
    if "crash" not in a.families:
        return [], []
    sweeps = []
    for wf in a.workflows:
        p = a.profile(wf)
        first: list[tuple[str, int]] = []
        for site, n in p.resume_sites():
            if site in a.in_txn:
                first.append((site, n))
            elif first:
                break
        sweeps.append(
            [
                _scenario(
                    f"{wf.name}/kill_in_first_commit/{site}@{n}",
                    _run(wf),
                    *_rounds(p.resume_round),
                    RunWorker(worker_id="w1", crash=CrashSpec(site=site, nth=n)),
                )
                for site, n in first[:MAX_TXN_SITES]
            ]
        )
    ends = [g[:1] + g[-1:] if len(g) > 1 else g for g in sweeps]
    return [s for g in ends for s in g], _interleave([g[1:-1] for g in sweeps])


@category("crash", place=130)
def _first_commit_ends(a: _Aim) -> list[Scenario]:
    """The first and last statements of the first commit after the decision
    (:func:`_commit_sweeps`): aimed early in each round."""
    return _commit_sweeps(a)[0]


@category("crash", place=170)
def _first_commit_middles(a: _Aim) -> list[Scenario]:
    """The middle statements of that commit (:func:`_commit_sweeps`)."""
    return _commit_sweeps(a)[1]


#: last-window schedules at most (one per workflow)
MAX_LAST_WINDOWS = 4


@category("crash", place=140)
def _last_windows(a: _Aim) -> list[Scenario]:
    """A kill in the last window: after the run's last durable write, before
    the record that it completed. The fault-free run's last commit is the
    one that ends it; the worker is killed at the last crash point before
    that commit begins (everything the run did is durable, its end is
    not), and another worker must finish it as the fault-free run did: its
    output, its state, its parent told. A runtime that treats a run found
    past its last step as done (records the end without the output, or
    never records it), or that replays the finished run from an earlier
    step, shows only here: the kills after each commit (``_commit_kills``)
    are capped, and reach a long workflow's last commits last, if at all.
    One per workflow, breadth-first."""
    if "crash" not in a.families or not a.in_txn:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        commits = p.commits(a.in_txn)
        if not commits:
            continue
        last = commits[-1]
        trace = p.rounds[last.round]
        end = trace.index(last.last)
        start = end
        while start > 0 and trace[start - 1][0] in a.in_txn:
            start -= 1
        # the crash point right before the commit's transaction (or its
        # first statement, when one commit follows another directly)
        site = trace[start - 1] if start > 0 else trace[start]
        out.append(
            _scenario(
                f"{wf.name}/last_window/r{last.round}/{site[0]}@{site[1]}",
                _run(wf),
                *_rounds(last.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=site[0], nth=site[1])),
            )
        )
    return out[:MAX_LAST_WINDOWS]


@sweep("crash", place=50)
def _commit_kills(a: _Aim) -> list[Scenario]:
    """A kill right after every commit of a fault-free run: first the
    commits that hand work or a message to another run (a child spawned, a
    child's completion delivered), then every other, breadth-first across
    workflows (each workflow's first commit, then each one's second...)."""
    if "crash" not in a.families or not a.in_txn:
        return []
    handoffs: list[list[Scenario]] = []
    others: list[list[Scenario]] = []
    for wf in a.workflows:
        p = a.profile(wf)
        commits = [c for c in p.commits(a.in_txn) if c.after is not None]
        handoffs.append([_kill_after(a, wf, c) for c in commits if c.handoff])
        others.append([_kill_after(a, wf, c) for c in commits if not c.handoff])
    return (_interleave(handoffs) + _interleave(others))[:MAX_COMMIT_KILLS]


@sweep("race", place=60)
def _barriers(a: _Aim) -> list[Scenario]:
    """Two workers held at the first crash point of a round (before either
    has claimed anything), then released together: they race for the same
    run truly at once, so a claim that is not atomic (a lost row lock, a
    read-then-write without one) lets both work it. The round that starts
    the run, then the one that resumes it after the decision."""
    if "race" not in a.families or not a.pausable:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        for r in sorted({0, p.resume_round}):
            if r >= len(p.rounds):
                continue
            first = next(((s, n) for s, n in p.rounds[r] if s in a.pausable), None)
            if first is None:
                continue
            out.append(
                _scenario(
                    f"{wf.name}/barrier_race/r{r}/{first[0]}@{first[1]}",
                    _run(wf),
                    *_rounds(r),
                    _paused("b1", *first),
                    _paused("b2", *first),
                    ReleaseWorkers(worker_ids=("b1", "b2")),
                )
            )
    return out


#: Seconds a crash episode's runs may stay down (one episode in
#: ``DOWNTIME_ODDS``): past the default approval lifetime and wait deadlines
#: of an hour.
DOWNTIME = 4000.0


DOWNTIME_ODDS = 4


#: How long the ``race`` family slows the first worker's effect: long enough
#: for a second worker to start and read the same state meanwhile.
RACE_DELAY = 1.0


@episode_of("crash")
def _crash_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A worker killed at a crash point, then possibly kills during recovery:
    each recovering worker may be killed in turn (a chain that shrinks to
    none), the long runs of one fault that swarms favour."""
    crash = _crash(draw, u, runs=runs)
    steps: list[Step] = [
        *_approved_first(draw, u, _run_ids(runs), n),
        RunWorker(worker_id=f"w{n}", crash=crash),
    ]
    chain = draw(st.integers(min_value=0, max_value=2))
    for k in range(chain):
        tag = "r" * (k + 1)
        steps.append(RunWorker(worker_id=f"w{n}{tag}", crash=_crash(draw, u, runs=runs)))
    # Sometimes the runs stay down past every deadline before anyone
    # resumes them: what was decided or delivered before the crash meets
    # a clock that moved on (an approval that expired meanwhile, a wait
    # whose answer came before its deadline). Shrinks to no downtime.
    if (
        Capability.CLOCK in u.capabilities
        and draw(st.integers(0, DOWNTIME_ODDS - 1)) == DOWNTIME_ODDS - 1
    ):
        steps.append(AdvanceClock(seconds=DOWNTIME))
    return steps


@episode_of("race")
def _race(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return _race_episode(draw, _effects(u, runs), _run_ids(runs), n)


def _race_episode(draw: st.DrawFn, effects: list[str], run_ids: list[str], n: int) -> list[Step]:
    """Two workers at once on the same runs, the first held inside a slowed effect.

    Optionally the runs are first brought to their approval waits and
    approved, so that the race is on the resume after the approval.
    """
    steps: list[Step] = []
    if draw(st.booleans()):
        steps += [RunWorker(worker_id=f"w{n}"), *(Approve(run_id=r) for r in run_ids)]
    service, _, action = draw(st.sampled_from(effects or ["payments.charge"])).partition(".")
    return [
        *steps,
        ArmWorldFault(service=service, action=action, nth=1, mode="slow", delay=RACE_DELAY),
        RaceWorkers(worker_ids=(f"a{n}", f"b{n}")),
    ]


@category("crash", place=160)
def _kills_before(a: _Aim) -> list[Scenario]:
    """A kill right before each effect (intent persisted, no call yet)."""
    if "crash" not in a.families:
        return []
    return _interleave(
        [
            [
                a.before(
                    wf,
                    es,
                    RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
                    name=f"kill_before/{es.effect}",
                )
                for es in a.profile(wf).effect_sites
            ]
            for wf in a.workflows
        ]
    )
