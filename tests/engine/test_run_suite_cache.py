"""``harness.testing.run_suite`` runs a search once per suite and hands the
report to every property test: the cache must not hand one setting's report
to a suite run under another (HARNESS_* environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.testing import run_suite

SPEC = "examples.minimal_adapter.adapter:ToyAdapter"


def test_a_suite_under_other_harness_settings_runs_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject settings apply
    monkeypatch.setenv("HARNESS_SEED", "0")
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "2")
    first = run_suite(SPEC, {"keyed": "true"}, None)
    assert run_suite(SPEC, {"keyed": "true"}, None) is first  # the same settings: one run
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "3")
    second = run_suite(SPEC, {"keyed": "true"}, None)
    assert second is not first
    assert (first["planned_scenarios"], second["planned_scenarios"]) == (2, 3)
