"""The scenario files kept in the repository's ``scenarios/`` folder.

Each ``scenarios/reference/<name>.json`` is a counterexample the harness once
found, kept as a regression scenario. On the correct reference runtime every
property holds in it; a file named after a seeded bug must still catch that
bug. ``harness run --scenario`` runs such files ahead of a search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.model import Scenario
from harness.scenarios import load_scenario_file
from reference_runtime._bugs import BUGS

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "scenarios" / "reference").glob("*.json"))


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_folder_holds_scenario_files() -> None:
    assert len(FILES) >= 3, FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_property_holds_on_the_correct_runtime(path: Path, tmp_path: Path) -> None:
    proc = _harness("replay", str(path), "--adapter", "reference", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not reproduced: no property failed this time" in proc.stdout
    # A property this scenario did not exercise is shown idle, never as a
    # pass it did not earn (the memory checker with nothing planted).
    shown = [line.split(None, 2) for line in proc.stdout.splitlines() if line.startswith("  ")]
    verdicts = {w[1].rstrip(":"): w[0] for w in shown if w[0] in ("pass", "idle")}
    assert set(verdicts.values()) <= {"pass", "idle"} and "pass" in verdicts.values()
    for words in shown:
        if len(words) == 3 and words[2] == "no memory faults planted":
            assert words[0] == "idle", proc.stdout


@pytest.mark.parametrize("path", [p for p in FILES if p.stem in BUGS], ids=lambda p: p.stem)
def test_a_file_named_after_a_seeded_bug_still_catches_it(path: Path, tmp_path: Path) -> None:
    bug = BUGS[path.stem]
    proc = _harness(
        "replay",
        str(path),
        "--adapter",
        "reference",
        "--adapter-opt",
        f"bug={bug.name}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "reproduced: " in proc.stdout and bug.breaks in proc.stdout.split("reproduced: ")[1]
    assert f"replay: harness replay {path} --adapter reference" in proc.stdout


def test_run_with_scenario_files_runs_them_before_the_search(tmp_path: Path) -> None:
    """Only the regression files run here (no targeted list, one sampled
    scenario at most, stop at the first failure): the file that catches
    no-inbox-dedup is the counterexample."""
    report_dir = tmp_path / "run"
    proc = _harness(
        "run",
        "--adapter",
        "reference",
        "--adapter-opt",
        "bug=no-inbox-dedup",
        "--profile",
        "ci",
        "--no-targeted",
        "--max-examples",
        "1",
        "--stop-on-first",
        "--scenario",
        str(ROOT / "scenarios" / "reference"),
        "--report-dir",
        str(report_dir),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kept = Scenario.model_validate_json((report_dir / "scenario.json").read_text())
    expected = load_scenario_file(ROOT / "scenarios" / "reference" / "no-inbox-dedup.json")
    assert kept == expected
    report = json.loads((report_dir / "report.json").read_text())
    failed = {p["name"] for p in report["properties"] if p["verdict"] == "fail"}
    assert BUGS["no-inbox-dedup"].breaks in failed


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such scenario file"),
        ("{not json", "is not JSON"),
        ('{"steps": [{"op": "teleport"}]}', "is not a valid scenario"),
        ('{"schema_version": 99, "steps": []}', "newer harness"),
    ],
)
def test_a_bad_scenario_file_is_a_usage_error(
    content: str | None, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    proc = _harness(
        "replay",
        str(path),
        "--adapter",
        "reference",
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_scenario_file_needs_an_adapter_to_replay_against(tmp_path: Path) -> None:
    proc = _harness("replay", str(FILES[0]), cwd=tmp_path)
    assert proc.returncode == 2
    assert "name the adapter to replay it against" in proc.stderr


def test_a_negative_schema_version_is_refused(tmp_path: Path) -> None:
    """Issue 13, defect 6: ``schema_version: -1`` was accepted."""
    scenario = json.loads(FILES[0].read_text())
    scenario["schema_version"] = -1
    path = tmp_path / "minus.json"
    path.write_text(json.dumps(scenario))
    proc = _harness("replay", str(path), "--adapter", "reference", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "schema_version" in proc.stderr and "greater than or equal to 1" in proc.stderr
