"""The sampled search's stream: swarm scenarios, and the targeted schedules
as a seed corpus that Hypothesis extends.

A targeted schedule puts one fault exactly where the fault-free trace says a
mistake would show (a kill between an effect's call and its record, a
decision delivered between a read and its commit); a swarm scenario
(:func:`~harness.scenarios.scenarios`) combines faults but rarely lands one
at such a spot: two cuts the same size as a targeted hit are seldom drawn.
Measured on hand-written realistic runtime mistakes, the sampled phase
alone found a fifth of what the whole search found, mostly by chance hits.

So half of the stream starts from a seed, the way a coverage-guided fuzzer
starts from its corpus (AFL, libFuzzer): one targeted schedule of the whole
list (the ``ci`` plan runs only its head; the tail is reached here), its
workload and faults kept, sometimes other runs submitted once they have
played (another tenant's, a twin), then up to :data:`MAX_EXTRA` episodes of a
swarm added before its final quiesce -- a second fault after the aimed one, where
combination mistakes live (a kill during the recovery of an aimed kill, an
outage after a held delivery, a memory plant beside a version switch). The
seed is drawn by its schedule kind (every kind alike), then by index, and
the extra episodes as a list, so a failing scenario shrinks to the seed
alone when the seed is enough, and to the first seeds (the plan's order)
otherwise.

The stream depends on the universe only, never on what a scenario did: the
jobs of ``--jobs N`` and the shards of a matrix draw it alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from ..model import Quiesce, Scenario, Step, Submit
from ._schedules._common import schedule_kind
from ._schedules._draws import ONCE_PER_SCENARIO, _of_family, swarms
from ._strategies import episode, rolls_back, run_specs, scenarios
from ._universe import Universe

#: the most swarm episodes added to a seed
MAX_EXTRA = 2
#: worker ids of added episodes start here (``w50``, ``z51``...): clear of
#: the ids a targeted schedule uses
FIRST_EXTRA_ID = 50
#: the name's prefix of a scenario grown from a seed
SEEDED = "seeded: "


def seeded(u: Universe, corpus: Sequence[Scenario]) -> st.SearchStrategy[Scenario]:
    """One of ``corpus``, with up to :data:`MAX_EXTRA` episodes of one swarm
    added before its final quiesce. A schedule kind first, then one of its
    schedules: each kind as likely as another, however many schedules it has
    (32 kills in a first commit, one forged decision), as the plan runs every
    kind once before any twice; it shrinks towards the first kind's first."""
    return _grown(u, _by_kind(corpus))


@st.composite
def _grown(draw: st.DrawFn, u: Universe, kinds: tuple[tuple[Scenario, ...], ...]) -> Scenario:
    group = kinds[draw(st.integers(min_value=0, max_value=len(kinds) - 1))]
    base = group[draw(st.integers(min_value=0, max_value=len(group) - 1))]
    steps: list[Step] = list(base.steps)
    if steps and isinstance(steps[-1], Quiesce):
        steps.pop()
    runs = base.runs
    # Other runs may join once the seed's faults have played (shrinks to
    # none): another tenant's beside the seed's, its twin, other workflows.
    room = u.max_runs - len(runs)
    if room > 0 and draw(st.booleans()):
        taken = {r.run_id for r in runs}
        joined = [
            r.model_copy(update={"run_id": _free_id(taken)})
            for r in draw(run_specs(u, twins=True))[:room]
        ]
        steps.extend(Submit(run=r) for r in joined)
        runs = (*runs, *joined)
    swarm = draw(swarms(u))
    extra = draw(st.integers(min_value=0, max_value=MAX_EXTRA)) if swarm.families else 0
    spent = frozenset(fam for fam in ONCE_PER_SCENARIO if _of_family(steps, fam))
    added: list[str] = []
    for i in range(extra):
        if spent >= set(swarm.families):
            break
        ep = draw(episode(u, runs, FIRST_EXTRA_ID + i, swarm, spent))
        if rolls_back(u, steps, ep):
            continue
        spent |= {fam for fam in ONCE_PER_SCENARIO if _of_family(ep, fam)}
        steps.extend(ep)
        added.append(swarm.describe())
    steps.append(Quiesce())
    name = SEEDED + base.name + (f" + swarm: {added[0]}" if added else "")
    return Scenario(name=name, steps=tuple(steps))


def _by_kind(corpus: Sequence[Scenario]) -> tuple[tuple[Scenario, ...], ...]:
    """``corpus`` grouped by schedule kind, in the order kinds first appear."""
    groups: dict[str, list[Scenario]] = {}
    for scenario in corpus:
        groups.setdefault(schedule_kind(scenario.name) or scenario.name, []).append(scenario)
    return tuple(tuple(g) for g in groups.values())


def _free_id(taken: set[str]) -> str:
    """A run id none of ``taken`` has (and record it)."""
    k = len(taken) + 1
    while f"r{k}" in taken:
        k += 1
    taken.add(f"r{k}")
    return f"r{k}"


def sampled_stream(u: Universe, corpus: Sequence[Scenario]) -> st.SearchStrategy[Scenario]:
    """The sampled search's strategy: a swarm scenario or, as often, a seed
    of ``corpus`` grown by a swarm's episodes (swarm scenarios alone when
    the corpus is empty: no site profile to aim with)."""
    if not corpus:
        return scenarios(u)
    return st.one_of(scenarios(u), seeded(u, corpus))
