"""What every family's episode draws with: the swarm a scenario draws
(:func:`swarms`), a family and a kind of it by weight, crash points where
the workload goes, and the runs' decisions first.

Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): each scenario
first draws its :class:`Swarm`, a random subset of the enabled fault families
(each with a weight) and of each family's kinds, then draws every episode
from that subset only (see :mod:`harness.scenarios._strategies`).
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import strategies as st

from ...adapters import Capability
from ...model import Approve, CrashSpec, RunSpec, RunWorker, Step
from ...vocabulary import FAULT_FAMILIES
from .._universe import Universe
from ._registry import episodes
from ._swarm import FAMILY_KINDS, Swarm

#: Families a scenario draws one episode of at most: a lost acknowledgement
#: costs the worker its network timeout (seconds), where other episodes
#: cost tenths; a second one in the same scenario finds little the first
#: and the targeted schedules do not.
ONCE_PER_SCENARIO = frozenset(f.name for f in FAULT_FAMILIES if f.once_per_scenario)


#: A swarm gives each of its families a weight from 1 to this: how often an
#: episode is of that family, relative to the others in the swarm.
MAX_WEIGHT = 4


@lru_cache(maxsize=256)
def _subset(items: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    """A non-empty subset of ``items`` in their order. Each item is in with
    probability 1/2 (Groce et al.'s coin per feature), so subsets of every
    size are drawn; it shrinks towards the first item alone. One strategy
    per ``items``: a new one per draw made Hypothesis validate it again each
    time (most of a swarm's draw)."""

    def keep(flags: list[bool]) -> tuple[str, ...]:
        chosen = tuple(i for i, on in zip(items, flags, strict=True) if on)
        return chosen or items[:1]

    return st.lists(st.booleans(), min_size=len(items), max_size=len(items)).map(keep)


@st.composite
def swarms(draw: st.DrawFn, u: Universe) -> Swarm:
    """A swarm over ``u``'s enabled families (empty when none is enabled)."""
    enabled = u.enabled()
    if not enabled:
        return Swarm(families=())
    families = draw(_subset(enabled))
    # A weight and a kind subset for every enabled family, in or out: the
    # draws keep their places when the shrinker drops a family, so what
    # follows them (the episodes) is read back unchanged.
    weight = {fam: draw(st.integers(1, MAX_WEIGHT)) for fam in enabled}
    kinds = {fam: draw(_subset(offered(u, fam))) for fam in enabled if fam in FAMILY_KINDS}
    return Swarm(
        families=families,
        weights=tuple(weight[fam] for fam in families),
        kinds={fam: k for fam, k in kinds.items() if fam in families},
    )


def offered(u: Universe, family: str) -> tuple[str, ...]:
    """The kinds of ``family`` ``u`` can arm: every kind of its record, but
    where its episode says otherwise (``episode_of(offered=...)``: the
    network kinds the adapter's connections let a backend inflict)."""
    ep = episodes().get(family)
    if ep is not None and ep.offered is not None:
        return ep.offered(u)
    return FAMILY_KINDS[family]


def _family(draw: st.DrawFn, u: Universe, swarm: Swarm, spent: frozenset[str] = frozenset()) -> str:
    """One family of the swarm, by weight.

    Drawn as a slot of a fixed table (every enabled family, ``MAX_WEIGHT``
    slots each) that the swarm's families and weights open, not as an index
    into the swarm: switching another family off then leaves this draw as
    it was, so the shrinker can drop every family an example does not need.
    ``spent``: families of :data:`ONCE_PER_SCENARIO` the scenario has drawn.
    """
    weights = swarm.weights or (1,) * len(swarm.families)
    weight = dict(zip(swarm.families, weights, strict=True))
    # A family drawn once already that may come once only is out (the
    # scenario ends when nothing else is left: see ``scenarios``).
    if any(f not in spent for f in swarm.families):
        weight = {f: w for f, w in weight.items() if f not in spent}
    order = [*u.enabled(), *(f for f in swarm.families if f not in u.enabled())]
    slots = [(fam, k) for fam in order for k in range(MAX_WEIGHT)]
    fam, _ = draw(st.sampled_from(slots).filter(lambda slot: slot[1] < weight.get(slot[0], 0)))
    return fam


def _kind(draw: st.DrawFn, swarm: Swarm, family: str, pool: tuple[str, ...] | None = None) -> str:
    """One kind of ``family`` that the swarm allows (stable as ``_family``),
    drawn from ``pool`` (default: every kind of the family)."""
    allowed = swarm.kinds_of(family)
    return draw(st.sampled_from(pool or FAMILY_KINDS[family]).filter(lambda k: k in allowed))


def _crash(
    draw: st.DrawFn, u: Universe, action: str = "kill", runs: tuple[RunSpec, ...] = ()
) -> CrashSpec:
    sites = u.pause_points if action == "pause" else u.crash_points
    reached = u.reached(runs, sites)
    # Aim where the workload goes: mostly at the sites its runs pass, at a hit
    # number one worker reaches; sometimes anywhere (recovery code, such as
    # reconciliation, is only passed after a fault).
    if reached and draw(st.integers(0, 3)) > 0:
        site = draw(st.sampled_from(sorted(reached)))
        # The first hit is drawn as often as the later ones together (and is
        # where shrinking goes): a worker passes most sites once per run.
        later = list(range(2, min(reached[site], 6) + 1))
        nth = draw(st.sampled_from([1] * max(1, len(later)) + later))
        return CrashSpec(site=site, nth=nth, action=action)
    site = draw(st.sampled_from(sites))
    nth = draw(st.sampled_from((1, 1, 2, 3)))
    return CrashSpec(site=site, nth=nth, action=action)


def _run_ids(runs: tuple[RunSpec, ...]) -> list[str]:
    return [r.run_id for r in runs]


def _effects(u: Universe, runs: tuple[RunSpec, ...]) -> list[str]:
    """The effect kinds the runs' workflows make, sorted."""
    return sorted(
        {e for r in runs for wf in u.workflows if wf.name == r.workflow for e in wf.effects}
    )


def _approved_first(draw: st.DrawFn, u: Universe, run_ids: list[str], n: int) -> list[Step]:
    """Maybe bring the runs to their approval waits and approve them first, so
    that the fault that follows hits the resume after a decision: the
    inbound message, the re-check and the gated effect (as ``_race_episode``).
    Shrinks to nothing."""
    if Capability.APPROVALS not in u.capabilities or not draw(st.booleans()):
        return []
    return [RunWorker(worker_id=f"p{n}"), *(Approve(run_id=r) for r in run_ids)]


def _of_family(steps: list[Step], family: str) -> bool:
    """Whether ``steps`` hold one of ``family``'s own steps (the step types
    its episode registered as ``marks``: a NetworkFault for ``network``)."""
    marks = episodes()[family].marks
    return any(isinstance(s, marks) for s in steps)
