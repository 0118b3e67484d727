"""Honest verdicts: a pass is earned over the whole search, the search goes on
after a failure, and every run that cannot earn a verdict says why (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engine_support import harness_cli

from harness._settings import PROFILES
from harness.checkers import CHECKERS
from harness.checkers._base import DISAGREED
from harness.model import PropertyResult, Verdict
from harness.outcome import NEEDS_CAPABILITY, NEEDS_FAMILY, Tally, judge
from harness.testing import PROPERTIES


def _result(name: str, verdict: Verdict, evidence: int, message: str = "m") -> PropertyResult:
    return PropertyResult(name=name, verdict=verdict, message=message, evidence=evidence)


def _tally(*results: PropertyResult) -> Tally:
    t = Tally()
    for r in results:
        t.add(r)
    return t


def _judge(tallies: dict[str, Tally], **kw: object) -> tuple[dict[str, Verdict], list[str]]:
    args: dict[str, object] = {
        "capabilities": ["memory_injection", "version_switch"],
        "families": ["crash", "memory", "migration"],
        "faults_armed": {},
        "faults_fired": {},
    }
    args.update(kw)
    j = judge(tallies, **args)  # type: ignore[arg-type]
    return {n: p.verdict for n, p in j.properties.items()}, j.inconclusive


def test_a_pass_needs_one_scenario_that_exercised_the_property() -> None:
    vacuous = _tally(*[_result("progress", Verdict.PASS, 0, "no runs")] * 5)
    earned = _tally(_result("progress", Verdict.PASS, 0), _result("progress", Verdict.PASS, 3))
    verdicts, why = _judge({"progress": vacuous})
    assert verdicts == {"progress": Verdict.UNKNOWN}
    assert why and "no runs" in why[0]
    verdicts, why = _judge({"progress": earned})
    assert verdicts == {"progress": Verdict.PASS} and why == []


def test_any_failing_scenario_fails_the_property_whatever_passed_elsewhere() -> None:
    t = _tally(_result("progress", Verdict.PASS, 2), _result("progress", Verdict.FAIL, 1))
    verdicts, _ = _judge({"progress": t})
    assert verdicts == {"progress": Verdict.FAIL}


def test_a_property_compared_with_disagreeing_fault_free_runs_is_unknown() -> None:
    """Held where the oracle was stable, not judged where the fault-free runs
    disagreed (a nondeterministic workflow): unknown and inconclusive, not a
    pass earned elsewhere."""
    untrusted = PropertyResult(
        name="resume_equivalence",
        verdict=Verdict.UNKNOWN,
        message="Not judged: the fault-free runs disagree",
        counts={DISAGREED: 1},
    )
    t = _tally(_result("resume_equivalence", Verdict.PASS, 2), untrusted)
    verdicts, why = _judge({"resume_equivalence": t})
    assert verdicts == {"resume_equivalence": Verdict.UNKNOWN}
    assert why and "1 of 2 scenarios" in why[0] and "disagree" in why[0]


def test_a_missing_capability_is_not_tested_and_not_inconclusive() -> None:
    t = _tally(_result("approval_integrity", Verdict.PASS, 0))
    verdicts, why = _judge({"approval_integrity": t})
    assert verdicts == {"approval_integrity": Verdict.NOT_TESTED}
    assert why == []


def test_a_family_switched_off_is_not_tested_and_not_inconclusive() -> None:
    t = _tally(_result("memory_safety", Verdict.PASS, 0))
    verdicts, why = _judge({"memory_safety": t}, families=["crash"])
    assert verdicts == {"memory_safety": Verdict.NOT_TESTED} and why == []


def test_a_family_armed_and_never_fired_leaves_its_property_untested_and_the_run_open() -> None:
    t = _tally(_result("memory_safety", Verdict.PASS, 0))
    verdicts, why = _judge({"memory_safety": t}, faults_armed={"memory": 4})
    assert verdicts == {"memory_safety": Verdict.NOT_TESTED}
    assert any("armed 4 times and never fired" in w for w in why)


def test_a_fault_family_armed_and_never_fired_makes_the_run_inconclusive() -> None:
    t = _tally(_result("progress", Verdict.PASS, 1))
    armed = {"world_fault": 30, "effect_boundary": 4}
    _, why = _judge({"progress": t}, faults_armed=armed, faults_fired={})
    assert why == [
        "the world fault family (effect_boundary, world_fault) was armed 34 times and never "
        "fired: the runtime never reached where it was aimed (check the workflows' declared "
        "effect kinds and crash points)"
    ]
    # one kind of the family firing is enough: a rule aimed past the last call
    # of a run is the sampler's miss, visible in the coverage, not the run's
    _, why = _judge({"progress": t}, faults_armed=armed, faults_fired={"effect_boundary": 1})
    assert why == []


def test_a_budget_that_cut_the_plan_says_how_much_ran() -> None:
    t = _tally(_result("progress", Verdict.PASS, 1))
    _, why = _judge({"progress": t}, planned=150, ran=26, budget_cut=True)
    assert why == [
        "the budget ended the search: ran 26 of 150 planned scenarios; "
        "raise --budget or use --profile dev"
    ]


def test_budget_cut_reference_run_exits_3_and_says_how_many_ran(tmp_path: Path) -> None:
    # 1 s: too short for the first schedule of every kind (a cut after that
    # keeps its verdict, which a quiet machine reaches within 3 s)
    proc = harness_cli(
        "run",
        "--adapter",
        "reference",
        "--profile",
        "ci",
        "--budget",
        "1",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["verdict"] == "unknown"
    ran = report["searched_scenarios"]
    planned = report["planned_scenarios"]
    assert 0 < ran < planned and planned >= PROFILES["ci"]["max_examples"]
    assert f"ran {ran} of {planned} planned scenarios; raise --budget" in proc.stdout
    assert "INCONCLUSIVE" in (tmp_path / "r" / "summary.md").read_text()


def _two_bugs_sampled(folder: Path, *extra: str) -> dict[str, Any]:
    """``harness run`` on the reference with two seeded bugs, 40 sampled
    scenarios (no targeted ones): exit 1; its report.json."""
    proc = harness_cli(
        "run",
        "--adapter",
        "reference",
        "--adapter-opt",
        "bug=no-migration,no-idempotency-key",
        "--profile",
        "dev",
        "--seed",
        # a seed whose 40 draws meet both bugs; the sampled stream changes
        # whenever the strategies do (a new kind of message): re-pick then
        "10",
        "--no-targeted",
        "--max-examples",
        "40",
        *extra,
        "--report-dir",
        str(folder),
        cwd=folder.parent,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads((folder / "report.json").read_text())
    return report


def test_the_search_goes_on_after_a_failure_and_shrinks_one_counterexample_per_property(
    tmp_path: Path,
) -> None:
    """Two seeded bugs, found by sampling alone: each failing property gets a
    minimal counterexample of its own, kept in its own folder, that replays."""
    folder = tmp_path / "r"
    report = _two_bugs_sampled(folder)
    props = {p["name"]: p for p in report["properties"]}
    assert props["migration_safety"]["verdict"] == "fail"
    assert props["exactly_once_effects"]["verdict"] == "fail"
    assert report["searched_scenarios"] == report["planned_scenarios"] == 40
    places = {props[n]["counterexample"] for n in ("migration_safety", "exactly_once_effects")}
    assert len(places) == 2, "each property has its own counterexample"
    for name in ("migration_safety", "exactly_once_effects"):
        where = folder / props[name]["counterexample"]
        replay = harness_cli("replay", str(where), cwd=tmp_path)
        assert replay.returncode == 1, replay.stdout + replay.stderr
        assert name in replay.stdout.split("reproduced: ")[1].splitlines()[0]
    # every other property is judged over the whole search, not one scenario
    assert props["progress"]["verdict"] == "pass"
    assert props["progress"]["exercised"] == props["progress"]["scenarios"] > 40


def test_stop_on_first_stops_at_the_first_failing_scenario(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    report = _two_bugs_sampled(folder, "--stop-on-first")
    assert report["searched_scenarios"] < 40
    failed = [p for p in report["properties"] if p["verdict"] == "fail"]
    # what that one scenario failed, each with it as its counterexample
    assert failed and len({p["counterexample"] for p in failed}) == 1, failed
    passed = [p for p in report["properties"] if p["verdict"] == "pass"]
    assert passed and all("--stop-on-first" in p["message"] for p in passed)


@pytest.mark.slow
def test_the_toy_suite_skips_what_the_toy_cannot_exercise_with_reasons(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    pytester.makepyfile(
        test_toy="""
from harness.testing import resilience_suite

TestToy = resilience_suite("examples.minimal_adapter.adapter:ToyAdapter", keyed="true")
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", "--harness-profile", "dev", "--harness-seed", "3"
    )
    result.assert_outcomes(passed=4, skipped=6)
    for name, capability in [
        ("approval_integrity", "approvals"),
        ("memory_safety", "memory_injection"),
        ("migration_safety", "version_switch"),
        ("context_rebuild", "context"),
        ("state_equivalence", "durable_state"),
        ("effects_accounted", "operations"),
    ]:
        result.stdout.fnmatch_lines(
            [f"SKIPPED*{name} not tested: the adapter does not declare the {capability}*"]
        )


def test_property_names_are_the_checkers_names_everywhere() -> None:
    """One list of properties (the checker registry); every other place that
    names a property is keyed by it."""
    assert tuple(CHECKERS) == PROPERTIES
    assert set(NEEDS_CAPABILITY) <= set(CHECKERS), set(NEEDS_CAPABILITY) - set(CHECKERS)
    assert set(NEEDS_FAMILY) <= set(CHECKERS), set(NEEDS_FAMILY) - set(CHECKERS)
