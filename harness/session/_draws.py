"""The sampled stream under Hypothesis: its settings, its seed corpus, and
what the sampled phase and the shrink pass share to draw the same
scenarios from one seed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.strategies import SearchStrategy

from ..model import Scenario
from ..scenarios import Universe, sampled_stream, targeted
from ._executor import scenario_key


class Found(Exception):
    """Raised inside the Hypothesis test to mark a failing example."""


class Done(BaseException):
    """Raised inside the sampled phase's Hypothesis test to end the run: the
    search stopped (budget spent, plan run out, every property failed), so
    no further scenario is worth drawing. A BaseException, so that
    Hypothesis neither takes it for a failing example (replayed, shrunk)
    nor catches it: it leaves ``@given`` at once."""


#: the fewest sampled draws of a plan whose stream is seeded with the
#: targeted schedules (see Stream): the ci profile's 30 are
SEEDED_FROM = 30


def hypothesis_settings(max_examples: int, shrink: bool) -> settings:
    # No hypothesis.target() either (issue 15): even without Phase.target
    # its scores decide which of Hypothesis's mutations are kept
    # (generate_mutations_from keeps one only if no score drops), so the
    # sampled stream would depend on what each scenario did, and a shard
    # (a job of --jobs N) that runs only part of it could not draw the
    # stream every N shares. Before that, target() only recorded (Hypothesis's
    # statistics). With it, past half the examples Hypothesis hill-climbs
    # from the best-scoring example of each label, mutating its choices:
    # measured on the reference runtime (ci, --no-targeted, seeds 0-2) it
    # reached fewer combinations (84/85/69 against 91/115/98) and fewer
    # distinct scenarios (110/93/88 against 114/115/121), so it is off.
    # The shrink pass must replay the search's phases to reach its
    # examples: keep the two in step if this changes.
    phases = (Phase.generate,)
    return settings(
        max_examples=max_examples,
        derandomize=False,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(*phases, Phase.shrink) if shrink else phases,
        suppress_health_check=list(HealthCheck),
    )


@contextlib.contextmanager
def own_draws() -> Iterator[None]:
    """While the search draws, Hypothesis reads no constants from local source.

    Hypothesis (from 6.131) sometimes draws a constant it found by parsing
    the source of every "local" module the process has imported (neither
    site-packages nor the standard library: an editable install and the
    user's app are local). For the harness that cost each process about
    0.5 s of CPU to parse that source, and Hypothesis wrote its parse cache
    (``.hypothesis/constants/``, a file per module: 116 for the reference
    runtime) into the working directory of whoever ran the harness -- not
    the report folder, and not ours to write. In principle it also let a
    seed's sampled scenarios depend on which modules happened to be loaded
    (40 draws measured alike either way). There is no setting for it, so
    while a search draws, the provider sees no local constants (its global
    ones stay), and its cache of permitted constants is emptied on the way
    in and out. Only this process's draws change, and only meanwhile: a
    user's own Hypothesis tests in the same process find it as it was. If
    a Hypothesis release moves these internals, this does nothing (and
    ``tests/engine/test_own_draws.py`` fails).
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # pragma: no cover - a Hypothesis without the feature
        yield
        return
    get = getattr(providers, "_get_local_constants", None)
    cache: Any = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if get is None or not hasattr(cache, "clear"):  # pragma: no cover
        yield
        return
    none = Constants()
    providers._get_local_constants = lambda: none
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = get
        cache.clear()


class Stream:
    """The sampled stream (:func:`~harness.scenarios.sampled_stream`) of
    one search of ``universe`` whose whole plan samples ``draws``
    scenarios (every shard knows it): swarm scenarios, and every targeted
    schedule of ``universe`` as a seed corpus (the whole list, not the
    plan's head), made once. A plan that samples fewer than
    :data:`SEEDED_FROM` scenarios samples swarms only: a few draws are
    worth most as the widest mix of families, the targeted head having
    just run the seeds."""

    def __init__(self, universe: Universe, draws: int) -> None:
        self.universe = universe
        self.draws = draws
        self._corpus: tuple[Scenario, ...] | None = None

    def strategy(self) -> SearchStrategy[Scenario]:
        if self.draws < SEEDED_FROM:
            return sampled_stream(self.universe, ())
        if self._corpus is None:
            self._corpus = tuple(targeted(self.universe))
        return sampled_stream(self.universe, self._corpus)


def repeat(seen: set[str], scenario: Scenario) -> bool:
    """Whether ``scenario``'s steps were drawn before (its name, the swarm it
    was drawn from, aside); remembers them. A pure function of the draws so
    far, so every shard (and the shrink pass's replay) skips alike."""
    key = scenario_key(scenario)
    if key in seen:
        return True
    seen.add(key)
    return False
