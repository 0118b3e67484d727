"""The targeted schedules of the ``zombie`` and ``operator`` families: a worker
paused past its lease before an effect, an operator's cancel while a worker
holds the run; and the two families' sampled-search episodes."""

from __future__ import annotations

from hypothesis import strategies as st

from ...model import AdvanceClock, Cancel, ContinueWorker, RunSpec, RunWorker, Scenario, Step
from .._universe import Universe
from ._common import _Aim, _before_last_commit, _effect_of, _paused
from ._draws import _crash, _run_ids
from ._registry import category, episode_of
from ._swarm import Swarm

#: boundaries before an effect at which a zombie is paused, nearest first
ZOMBIE_SITES = 4


@category("operator", place=150)
def _operator_cancels(a: _Aim) -> list[Scenario]:
    """An operator cancels the run while a worker paused right before its last
    commit ahead of the first effect holds it: that commit must not undo the
    cancellation."""
    if "operator" not in a.families:
        return []
    return [
        a.before(
            wf,
            es,
            _paused("o1", site, n),
            Cancel(run_id="r1"),
            ContinueWorker(worker_id="o1"),
            name=f"cancel_while_held/{es.effect}/{site}@{n}",
        )
        for wf in a.workflows
        for es in a.profile(wf).effect_sites[:1]
        for site, n in _before_last_commit(es, a.pausable, a.in_txn)
    ]


# Zombies (a lease that expired under a paused worker) early in each
# round: a plan the ci budget cuts must still reach the later workflows'
# zombie schedules, which find the fencing mistakes.
@category("zombie", place=20)
def _zombies(a: _Aim) -> list[Scenario]:
    """A worker paused just before an effect outlives its lease; another takes
    over; the first wakes up and carries on. Paused at each of the last few
    boundaries before the call, nearest first: a runtime checks its lease at
    one of them, and only a pause before that check tests it. All of one
    call's boundaries before the next call's: where the check sits matters
    more than which call it guards. Calls the runtime declares at most once
    (``exactly_once``, ``at_most_once``) come before ``at_least_once`` ones:
    a zombie's second call is a violation only where one was promised."""
    if "zombie" not in a.families:
        return []
    groups = []
    for wf in a.workflows:
        for es in a.profile(wf).effect_sites:
            near = [(site, n) for site, n in reversed(es.approach) if site in a.pausable]
            groups.append(
                [
                    a.before(
                        wf,
                        es,
                        _paused("z1", site, n),
                        AdvanceClock(seconds=a.u.lease_seconds + 1),
                        RunWorker(worker_id="w1"),
                        ContinueWorker(worker_id="z1"),
                        name=f"zombie_before/{es.effect}/{site}@{n}",
                    )
                    for site, n in near[:ZOMBIE_SITES]
                ]
            )
    once = [g for g in groups if g and a.u.delivery.get(_effect_of(g[0])) != "at_least_once"]
    rest = [g for g in groups if g and a.u.delivery.get(_effect_of(g[0])) == "at_least_once"]
    return [s for g in [*once, *rest] for s in g]


@episode_of("zombie")
def _zombie_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A paused worker outlives its lease; another takes over; it wakes up."""
    return [
        RunWorker(worker_id=f"z{n}", crash=_crash(draw, u, "pause", runs)),
        AdvanceClock(seconds=u.lease_seconds + 1),
        RunWorker(worker_id=f"w{n}"),
        ContinueWorker(worker_id=f"z{n}"),
    ]


@episode_of("operator")
def _operator_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """An operator cancels a run while a worker, paused mid-step, holds it."""
    return [
        RunWorker(worker_id=f"o{n}", crash=_crash(draw, u, "pause", runs)),
        Cancel(run_id=draw(st.sampled_from(_run_ids(runs)))),
        ContinueWorker(worker_id=f"o{n}"),
    ]
