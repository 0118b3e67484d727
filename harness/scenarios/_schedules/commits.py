"""Targeted schedules of the ``crash`` and ``race`` families aimed at commits:
kills inside and right after each commit, the last window before a run ends,
workers released together from a barrier."""

from __future__ import annotations

from ...model import CrashSpec, ReleaseWorkers, RunWorker, Scenario
from ._common import _Aim, _interleave, _kill_after, _paused, _rounds, _run, _scenario

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


#: last-window schedules at most (one per workflow)
MAX_LAST_WINDOWS = 4


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
