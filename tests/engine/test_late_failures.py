"""A property that first fails in a shrink-phase run gets a counterexample
(``harness.session._shrink.Shrink._adopt_late_failures``): its tally says
FAIL like any other, so the report must have a scenario to replay for it."""

from __future__ import annotations

import time
from pathlib import Path

from harness._settings import load_settings
from harness.model import PropertyResult, Quiesce, Scenario, Verdict
from harness.outcome import Draft, Example
from harness.runner import Coverage
from harness.scenarios import Universe
from harness.session._draws import Stream
from harness.session._shrink import Shrink


def _example(name: str, failed: list[str], folder: Path) -> Example:
    results = [PropertyResult(name=p, verdict=Verdict.FAIL, message="x") for p in failed]
    return Example(Scenario(name=name, steps=(Quiesce(),)), results, folder, Coverage(), 0.1)


def test_a_property_failed_only_by_a_shrink_run_gets_that_run_as_counterexample(
    tmp_path: Path,
) -> None:
    settings = load_settings("dev")
    searched = _example("searched", ["exactly_once_effects"], tmp_path / "a")
    # a candidate shrunk for exactly_once_effects that failed progress too
    candidate = _example("candidate", ["exactly_once_effects", "progress"], tmp_path / "b")
    outcome = Draft("toy", {}, [], settings, seed=0)
    universe = Universe(workflows=(), crash_points=(), pause_points=(), capabilities=frozenset())
    shrink = Shrink(
        outcome,
        Stream(universe, 0),
        0,
        settings=settings,
        started=time.monotonic(),
        known={},
        failures=[searched, candidate],
        run=lambda scenario: searched,
    )
    shrink.all({"exactly_once_effects": (searched, False)}, 0, enabled=False)
    assert outcome.counterexamples["exactly_once_effects"] is searched
    assert outcome.counterexamples["progress"] is candidate
