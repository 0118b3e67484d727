"""``harness replay`` says ``not_tested`` where the run did (issue 34).

A replay used to label each property by its one result: a property the
adapter gives nothing to judge (no ``approvals`` capability, say) printed
``idle`` or, when its checker counted something, ``pass`` -- while the run
had reported it ``not_tested``. A replay's labels follow the run's rules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine_support import harness_cli

from harness.model import PropertyResult, Scenario, Verdict
from harness.outcome import Example
from harness.outcome._replayed import replay_labels
from harness.runner import Coverage


def _example(*results: PropertyResult) -> Example:
    return Example(Scenario(name="s", steps=[]), list(results), Path("."), Coverage(), 0.1)


def _pass(name: str, evidence: int) -> PropertyResult:
    return PropertyResult(name=name, verdict=Verdict.PASS, message="held", evidence=evidence)


def test_a_property_without_its_capability_is_not_tested_by_the_runs_rule() -> None:
    labels = replay_labels(
        _example(_pass("approval_integrity", 0), _pass("exactly_once_effects", 2)),
        capabilities=[],
    )
    by = {r.name: r for r in labels}
    assert by["exactly_once_effects"].label == "pass"
    assert by["approval_integrity"].label == "not_tested"
    labels = replay_labels(_example(_pass("approval_integrity", 0)), capabilities=[])
    assert (labels[0].label, labels[0].message) == (
        "not_tested",
        "the adapter does not declare the approvals capability",
    )


def test_what_the_run_reported_not_tested_stays_not_tested_unless_it_fails() -> None:
    recorded = {
        "approval_integrity": ("not_tested", "the adapter does not declare approvals"),
        "state_equivalence": ("not_tested", "the adapter does not declare it"),
    }
    failing = PropertyResult(name="state_equivalence", verdict=Verdict.FAIL, message="differs")
    labels = replay_labels(
        _example(_pass("approval_integrity", 5), failing),
        capabilities=["approvals"],
        recorded=recorded,
    )
    by = {r.name: r for r in labels}
    assert by["approval_integrity"].label == "not_tested"
    assert "does not declare approvals" in by["approval_integrity"].message
    assert by["state_equivalence"].label == "fail"


def test_a_family_switched_off_is_not_tested_and_one_merely_unarmed_is_idle() -> None:
    memory = _pass("memory_safety", 0)
    off = replay_labels(_example(memory), capabilities=["memory_injection"], families=["crash"])
    assert off[0].label == "not_tested" and "switched off" in off[0].message
    on = replay_labels(_example(memory), capabilities=["memory_injection"], families=["memory"])
    assert on[0].label == "idle"


def test_replay_of_a_run_folder_says_not_tested_as_the_run_did(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    args = ["--adapter", "chat_runtime:ChatAdapter", "--adapter-opt", "reappend=true"]
    run = harness_cli(
        "run", *args, "--profile", "dev", "--seed", "1", "--stop-on-first",
        "--report-dir", str(folder), cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads((folder / "report.json").read_text())
    props = report["properties"]
    untested = {p["name"]: p["reason"] for p in props if p["verdict"] == "not_tested"}
    assert "approval_integrity" in untested, report["properties"]
    replay = harness_cli("replay", str(folder), *args, cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    for name, reason in untested.items():
        line = re.search(rf"^\s+(\S+)\s+{name}: (.*)$", replay.stdout, re.MULTILINE)
        assert line is not None, replay.stdout
        assert line.group(1) == "not_tested", line.group(0)
        assert reason in line.group(2), line.group(0)
    assert not re.search(r"^\s+(pass|idle)\s+approval_integrity", replay.stdout, re.MULTILINE)
