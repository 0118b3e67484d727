"""The sampled stream's seeds (issue 28, "a sampled search that finds"):
half of the stream grows a targeted schedule -- its steps kept, other runs
sometimes joining, swarm episodes added before its final quiesce -- and
the stream depends on the universe alone.

Generation only: no runtime runs here. Whether the seeds find more is
measured by ``benchmarks/realistic.py --phases sampled``."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import Phase, find, given, seed, settings
from hypothesis import strategies as st
from test_targeted import CAPS, universe

from harness.adapters import Capability
from harness.model import Quiesce, RaceWorkers, RunWorker, Scenario, Submit
from harness.nemesis import validate
from harness.scenarios import sampled_stream, targeted
from harness.scenarios._seeded import SEEDED, _by_kind, seeded

U = universe()
CORPUS = tuple(targeted(U))
SEARCH = settings(max_examples=800, database=None, phases=[Phase.generate], derandomize=True)


def _base(scenario: Scenario) -> Scenario:
    name = scenario.name.removeprefix(SEEDED).split(" + swarm: ")[0]
    return next(s for s in CORPUS if s.name == name)


@settings(max_examples=150, database=None, phases=[Phase.generate])
@given(seeded(U, CORPUS))
def test_a_seeded_scenario_runs_its_seed_first_and_ends_with_a_quiesce(scenario: Scenario) -> None:
    base = _base(scenario)
    head = base.steps[:-1] if isinstance(base.steps[-1], Quiesce) else base.steps
    assert scenario.steps[: len(head)] == head
    assert isinstance(scenario.steps[-1], Quiesce)
    # run and worker ids stay unique once runs join and episodes are added
    runs = Counter(s.run.run_id for s in scenario.steps if isinstance(s, Submit))
    assert max(runs.values()) == 1, runs
    # joining respects the universe's bound; a misdirected decision's
    # episode may add the twin that signed it (``r4x50``) on top
    assert len([r for r in runs if "x" not in r]) <= U.max_runs, runs
    workers = Counter(s.worker_id for s in scenario.steps if isinstance(s, RunWorker))
    assert max(workers.values()) == 1, workers
    validate(scenario, CAPS)


def test_a_seed_grows_a_second_fault_and_another_tenant_joins() -> None:
    grown = find(
        seeded(U, CORPUS),
        lambda s: (
            " + swarm: " in s.name
            and len({r.tenant for r in s.runs}) == 2
            and len(s.steps) > len(_base(s).steps) + 2
        ),
        settings=SEARCH,
    )
    validate(grown, CAPS)


def test_seeds_are_drawn_kind_first_and_shrink_towards_the_first() -> None:
    kinds = _by_kind(CORPUS)
    assert sorted(s.name for g in kinds for s in g) == sorted(s.name for s in CORPUS)
    assert max(map(len, kinds)) > 1  # a kind of many schedules weighs as one
    # the last kind's last seed, as likely as any kind's (derandomized: a
    # random search of 800 missed it once in CI)
    last = kinds[-1][-1].name
    fixed = settings(max_examples=2000, database=None, phases=[Phase.generate], derandomize=True)
    assert find(seeded(U, CORPUS), lambda s: _base(s).name == last, settings=fixed)
    # the simplest seeded scenario is the first seed alone
    simplest = find(seeded(U, CORPUS), lambda s: True)
    assert simplest.name == SEEDED + CORPUS[0].name
    assert simplest.steps == CORPUS[0].steps


def test_half_the_stream_is_seeded_and_without_a_corpus_none_is() -> None:
    def names(corpus: tuple[Scenario, ...]) -> list[str]:
        drawn: list[str] = []

        @seed(3)
        @settings(max_examples=60, database=None, phases=[Phase.generate])
        @given(sampled_stream(U, corpus))
        def draw(s: Scenario) -> None:
            drawn.append(s.name)

        draw()
        return drawn

    with_seeds = names(CORPUS)
    share = sum(n.startswith(SEEDED) for n in with_seeds) / len(with_seeds)
    assert 0.25 < share < 0.75, share
    # the same seed, the same stream: it depends on the universe alone
    assert names(CORPUS) == with_seeds
    assert not any(n.startswith(SEEDED) for n in names(()))


def test_a_universe_without_capabilities_draws_seeds_it_can_run() -> None:
    bare = universe(caps=frozenset({Capability.CRASH_POINTS}))
    corpus = tuple(targeted(bare))
    assert corpus
    scenario = find(seeded(bare, corpus), lambda s: " + swarm: " in s.name, settings=SEARCH)
    validate(scenario, frozenset({Capability.CRASH_POINTS}))


@given(st.data())
@settings(max_examples=1, database=None)
def test_an_empty_corpus_is_the_swarm_stream(data: st.DataObject) -> None:
    scenario = data.draw(sampled_stream(U, ()))
    assert not scenario.name.startswith(SEEDED)


def _old_after_today(s: Scenario) -> bool:
    """An older release's worker starts after one of today's code ran."""
    today = False
    for step in s.steps:
        if isinstance(step, RunWorker | Quiesce) and step.code_version is not None and today:
            return True
        if isinstance(step, RaceWorkers) or (
            isinstance(step, RunWorker | Quiesce) and step.code_version is None
        ):
            today = True
    return False


@pytest.mark.parametrize("rollbacks", [False, True])
def test_without_declared_rollbacks_no_older_worker_follows_todays_code(rollbacks: bool) -> None:
    """An adapter that does not declare ``rolls_back`` never meets an older
    release after this one wrote (a false FAIL on Temporal's patched app:
    a world kill's worker under today's code, then the migration episode's
    release-1 worker); one that declares it still does."""
    u = universe(rollbacks=rollbacks)
    stream = sampled_stream(u, tuple(targeted(u)))
    seen = []

    @settings(max_examples=200, database=None, phases=[Phase.generate], derandomize=True)
    @given(stream)
    def draw(s: Scenario) -> None:
        seen.append(_old_after_today(s))

    draw()
    assert any(seen) is rollbacks, (sum(seen), len(seen))
