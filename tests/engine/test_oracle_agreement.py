"""Fault-free runs must agree before they are trusted (issue 31).

An app whose model is not scripted picks one tool in one fault-free run and
the other in the next (``unscripted_runtime``): every property that compares
a run with its fault-free oracle would fail against a run that merely went
the other way. The harness runs each workflow's first fault-free run twice,
sees them disagree, and those properties read ``unknown`` with the first
difference and the fix, never ``fail``: the run is inconclusive (exit 3).
The same app with its model scripted passes.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine_support import harness_cli

import harness

UNSCRIPTED = "unscripted_runtime:UnscriptedAdapter"
#: a small plan: the targeted schedules' first rounds, a few sampled ones
PLAN = ["--profile", "ci", "--max-examples", "12"]


def test_an_unscripted_model_makes_the_comparing_properties_unknown_never_fail(
    tmp_path: Path,
) -> None:
    proc = harness_cli(
        "run", "--adapter", UNSCRIPTED, *PLAN, "--report-dir", str(tmp_path), cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    verdicts = {p["name"]: p for p in report["properties"]}
    assert "fail" not in {p["verdict"] for p in verdicts.values()}, verdicts
    resume = verdicts["resume_equivalence"]
    assert resume["verdict"] == "unknown"
    # The first difference (the two tools' words), and how to fix it.
    assert "two fault-free runs of workflow 'pay' with the same input differ" in resume["message"]
    assert "output differs in told_by: 'send_thanks' vs 'send_receipt'" in resume["message"]
    assert "script the model" in resume["message"]
    # What does not compare with the oracle is judged as ever.
    assert verdicts["exactly_once_effects"]["verdict"] == "pass"
    assert verdicts["legal_transitions"]["verdict"] == "pass"
    assert "disagree" in proc.stdout


def test_the_same_app_with_a_scripted_model_passes(tmp_path: Path) -> None:
    report = harness.run(
        UNSCRIPTED,
        options={"model": "scripted"},
        profile="ci",
        max_examples=12,
        report_dir=tmp_path,
    )
    verdicts = {p.name: p.verdict for p in report.properties}
    assert report.verdict == "pass", verdicts
    assert verdicts["resume_equivalence"] == "pass"


def test_one_fault_free_run_is_trusted_unchecked_when_asked(tmp_path: Path) -> None:
    """``--determinism-runs 1``: the check is off, and the unscripted model's
    differences are judged as failures again (what the check prevents)."""
    report = harness.run(
        UNSCRIPTED,
        profile="ci",
        max_examples=12,
        report_dir=tmp_path,
        determinism_runs=1,
    )
    verdicts = {p.name: p.verdict for p in report.properties}
    assert verdicts["resume_equivalence"] == "fail", verdicts


def test_zero_determinism_runs_is_refused_with_the_reason(tmp_path: Path) -> None:
    proc = harness_cli(
        "run", "--adapter", UNSCRIPTED, *PLAN, "--determinism-runs", "0", cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "determinism-runs=0 is out of range" in proc.stderr
    assert "fault-free runs of each workflow" in proc.stderr


def test_check_adapter_warns_of_fault_free_runs_that_disagree(tmp_path: Path) -> None:
    proc = harness_cli("check-adapter", UNSCRIPTED, cwd=tmp_path)
    assert "warning: its fault-free runs disagree" in proc.stdout, proc.stdout + proc.stderr
    assert "output differs in told_by" in proc.stdout
    scripted = harness_cli("check-adapter", UNSCRIPTED, "--adapter-opt", "model=scripted",
                           cwd=tmp_path)  # fmt: skip
    assert "disagree" not in scripted.stdout, scripted.stdout
