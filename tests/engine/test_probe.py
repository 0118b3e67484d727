"""Before a search, each workflow's fault-free run is checked against what the
adapter declares: a mismatch would make every aimed fault miss (exit 2). A
runtime that cannot finish that run is a finding instead: ``progress``
fails with the probe as its counterexample (exit 1), and replaying it
fails again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_support import harness_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("adapter", "expected"),
    [
        (
            "DeclaresRefund",
            "workflow 'charge' declares effect kind(s) payments.refund that its fault-free "
            "run never performed (it performed: payments.charge)",
        ),
        (
            "DeclaresNothing",
            "workflow 'charge' performed effect kind(s) payments.charge that it does not declare",
        ),
    ],
)
def test_a_declaration_the_fault_free_run_contradicts_is_refused_with_exit_2(
    adapter: str, expected: str, tmp_path: Path
) -> None:
    proc = harness_cli(
        "run",
        "--adapter",
        f"mismatched_adapters:{adapter}",
        "--max-examples",
        "3",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r" / "report.json").exists(), "no search ran, no report"


def test_a_runtime_that_cannot_finish_a_fault_free_run_fails_progress_with_a_replay(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r"
    proc = harness_cli(
        "run",
        "--adapter",
        "mismatched_adapters:NeverFinishes",
        "--max-examples",
        "3",
        "--report-dir",
        str(report),
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads((report / "report.json").read_text())
    progress = next(p for p in data["properties"] if p["name"] == "progress")
    assert progress["verdict"] == "fail", progress
    assert "the fault-free run of workflow 'charge' never completed" in progress["message"]
    assert "did not finish without faults (state pending" in progress["message"]
    # its counterexample is the probe: the example input, then quiesce; no fault
    steps = data["counterexample"]["steps"]
    assert len(steps) == 2 and "submit charge" in steps[0], steps
    # a report, not a refusal: no search ran after it, and replay fails again
    replay = harness_cli(
        "replay",
        str(report),
        "--adapter",
        "mismatched_adapters:NeverFinishes",
        cwd=ROOT,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced: progress failed" in replay.stdout


def test_a_declared_effect_completed_runs_never_perform_is_a_finding(tmp_path: Path) -> None:
    """Not certainly the declaration's mistake: a runtime that skips an
    effect completes too (a generated mutant did). ``check-adapter`` calls
    it a wrong effect declaration (exit 2); a run fails ``progress``."""
    report = tmp_path / "r"
    proc = harness_cli(
        "run",
        "--adapter",
        "mismatched_adapters:DeclaresMore",
        "--max-examples",
        "3",
        "--report-dir",
        str(report),
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((report / "report.json").read_text())
    progress = next(p for p in data["properties"] if p["name"] == "progress")
    assert (
        "completed without faults but without performing its declared effect kind(s) "
        in (progress["message"])
    )
    assert "payments.refund" in progress["message"]


def test_the_guide_toy_passes_the_probe(tmp_path: Path) -> None:
    proc = harness_cli(
        "run",
        "--adapter",
        "examples.minimal_adapter.adapter:ToyAdapter",
        "--max-examples",
        "3",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=ROOT,
    )
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert (tmp_path / "r" / "report.json").exists()
