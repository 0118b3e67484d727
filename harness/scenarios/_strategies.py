"""Hypothesis strategies for workloads and fault schedules.

A scenario is a workload (a few runs of the adapter's workflows, for one or
two tenants) followed by a fault schedule built from *episodes*, each of which
exercises one fault family, and it always ends with a quiesce (faults stop,
workers drain the queue). Everything is drawn from data the adapter declares
-- its workflows, its crash points, its capabilities -- so a strategy never
asks for what the runtime cannot do. Lists shrink towards fewer runs and
fewer, simpler episodes, so a failure ends as a short readable counterexample.

Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): each scenario
first draws its :class:`Swarm`, a random subset of the enabled fault families
(each with a weight) and of each family's kinds (world modes, memory kinds,
message variants), then draws every episode from that subset only. Uniform
mixing spreads a scenario's few episodes over every family, so two faults of
one kind rarely meet; a swarm of one or two kinds gives long runs of them,
which is where combination bugs are (a kill during the recovery of a kill, a
second reject after a retried timeout). A swarm shrinks towards one family
and one kind (the first enabled), so a counterexample also says which
faults it needs.

Each family's episode is its own module's (``harness.scenarios._schedules``:
the module its record names registers it with ``@episode_of``, beside its
targeted schedules); this module composes them into scenarios.

The swarm also picks workload *shapes* (issue 28), as kinds of the families
they belong to, so an adapter without the family draws what it drew before:
identical twin runs of one tenant and decisions signed for a twin's approval
(``message``: ``misdirected``), a decision delivered while a worker holds
the run between its read and its commit (``message``: ``while_held``),
a verified memory version under a newer one that lapsed or only a user
supplied (``memory``), a rollback order of code versions (``migration``:
``rollback``), and runs left down past every deadline after a crash
(:data:`DOWNTIME`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from hypothesis import strategies as st

from ..adapters import Capability
from ..model import Quiesce, RaceWorkers, RunSpec, RunWorker, Scenario, Step, Submit
from ._schedules._draws import MAX_WEIGHT, ONCE_PER_SCENARIO, _family, _of_family, swarms
from ._schedules._registry import Episode, episodes
from ._schedules._swarm import FAMILY_KINDS, Swarm
from ._universe import TENANTS, Universe

__all__ = [
    "EPISODES",
    "FAMILY_KINDS",
    "MAX_WEIGHT",
    "ONCE_PER_SCENARIO",
    "TWIN_ODDS",
    "Episode",
    "Swarm",
    "episode",
    "run_specs",
    "scenarios",
    "swarms",
]

#: Where a swarm allows misdirected decisions, one run in this many after
#: the first is the identical twin of the run before it (same tenant,
#: workflow, input and decision): the decision a twin's approver signed is
#: the one to misdirect, and each twin must have effects of its own (a
#: runtime that keys an effect by its content answers the second with the
#: first's). Drawn only in such swarms, so that the stream of an adapter
#: without approvals is unchanged.
TWIN_ODDS = 2

#: Each fault family's episode for the sampled search, in the records'
#: order (registered by the family's module: a test keeps every family
#: with one).
EPISODES: Mapping[str, Episode] = MappingProxyType(
    {family: e.draw for family, e in episodes().items()}
)


@st.composite
def run_specs(draw: st.DrawFn, u: Universe, twins: bool = False) -> tuple[RunSpec, ...]:
    """1 to ``u.max_runs`` runs; with ``twins``, sometimes one the identical
    twin of the run before (see :data:`TWIN_ODDS`; shrinks to no twin)."""
    n = draw(st.integers(min_value=1, max_value=u.max_runs))
    runs: list[RunSpec] = []
    for i in range(n):
        if twins and runs and draw(st.integers(0, TWIN_ODDS - 1)) == TWIN_ODDS - 1:
            runs.append(runs[-1].model_copy(update={"run_id": f"r{i + 1}"}))
            continue
        wf = draw(st.sampled_from(u.workflows))
        payload = draw(st.sampled_from(wf.inputs))
        tenant = draw(st.sampled_from(TENANTS))
        decision = draw(st.sampled_from(("approved", "approved", "approved", "rejected")))
        # One run in four is an older release's; shrinking goes to today's
        # (towards 0), so a counterexample says "under code v1" only if it
        # needs the older release.
        old = Capability.VERSION_SWITCH in u.capabilities and draw(st.integers(0, 3)) == 3
        runs.append(
            RunSpec(
                run_id=f"r{i + 1}",
                tenant=tenant,
                workflow=wf.name,
                input=dict(payload),
                decision=decision if wf.needs_approval else "approved",
                code_version=1 if old else None,
            )
        )
    return tuple(runs)


@st.composite
def episode(
    draw: st.DrawFn,
    u: Universe,
    runs: tuple[RunSpec, ...],
    n: int,
    swarm: Swarm | None = None,
    spent: frozenset[str] = frozenset(),
) -> list[Step]:
    """One fault episode of a family (and kinds) of ``swarm`` (default: every
    enabled family, every kind); ``n`` makes worker ids unique within the
    scenario; ``spent``: families of :data:`ONCE_PER_SCENARIO` already drawn."""
    swarm = swarm or Swarm(families=u.enabled())
    family = _family(draw, u, swarm, spent)
    return episodes()[family].draw(draw, u, runs, n, swarm)


def rolls_back(u: Universe, before: Sequence[Step], episode: Sequence[Step]) -> bool:
    """Whether ``episode``, after ``before``, starts a worker of an older
    release once today's code has run, though the adapter does not declare
    rollbacks (``rolls_back``): the older release would meet what this one
    wrote, an order its deployments never run (a Temporal app's release-1
    worker cannot replay today's patch marker). Episodes are drawn one by
    one, so one drawn alone (old code first: an upgrade) may land after
    another's worker; the composers leave such an episode out."""
    if u.rollbacks:
        return False
    today = any(
        isinstance(s, RaceWorkers)
        or (isinstance(s, RunWorker | Quiesce) and s.code_version is None)
        for s in before
    )
    return today and any(
        isinstance(s, RunWorker | Quiesce) and s.code_version is not None for s in episode
    )


@st.composite
def scenarios(draw: st.DrawFn, u: Universe, swarm: Swarm | None = None) -> Scenario:
    """A workload, then 1 to ``u.max_episodes`` episodes of one swarm (drawn
    first, unless given), then a quiesce. The scenario's name is its swarm.
    With no family enabled, the workload alone runs (and quiesces)."""
    swarm = swarm if swarm is not None else draw(swarms(u))
    twins = "message" in swarm.families and "misdirected" in swarm.kinds_of("message")
    runs = draw(run_specs(u, twins=twins))
    steps: list[Step] = [Submit(run=r) for r in runs]
    if swarm.families:
        n_episodes = draw(st.integers(min_value=1, max_value=u.max_episodes))
        spent: frozenset[str] = frozenset()
        for i in range(n_episodes):
            if spent >= set(swarm.families):
                break  # every family of the swarm may come once only, and has
            ep = draw(episode(u, runs, i, swarm, spent))
            if rolls_back(u, steps, ep):
                continue
            spent |= {fam for fam in ONCE_PER_SCENARIO if _of_family(ep, fam)}
            steps.extend(ep)
    steps.append(Quiesce())
    return Scenario(name=f"swarm: {swarm.describe() or 'none'}", steps=tuple(steps))
