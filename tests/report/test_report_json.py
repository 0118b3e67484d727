"""``report.json``: the published contract, its shipped schema, and re-rendering."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from engine_support import harness_cli

from harness.report import REPORT_FILES, REPORT_SCHEMA_VERSION, Report, report_schema_text

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "harness" / "report" / "report.schema.json"


def _schema() -> dict[str, object]:
    data: dict[str, object] = json.loads(SCHEMA_FILE.read_text())
    return data


def test_the_shipped_schema_is_the_one_generated_from_the_model() -> None:
    assert SCHEMA_FILE.read_text() == report_schema_text(), (
        "harness/report/report.schema.json is stale: regenerate it with "
        "python -c 'from harness.report import report_schema_text as t; "
        'open("harness/report/report.schema.json", "w").write(t())\''
    )


def test_the_schema_ships_inside_the_package() -> None:
    from importlib.resources import files

    text = files("harness.report").joinpath("report.schema.json").read_text()
    assert json.loads(text)["title"] == "Report"


def test_a_failing_run_writes_all_four_files(failing_run: tuple[Path, str]) -> None:
    folder, stdout = failing_run
    for name in REPORT_FILES:
        assert (folder / name).is_file(), name
        assert (folder / name).stat().st_size > 200, name
    assert "report.html, junit.xml, summary.md" in stdout


def test_the_failing_report_validates_against_the_shipped_schema(
    failing_run: tuple[Path, str],
) -> None:
    report = json.loads((failing_run[0] / "report.json").read_text())
    jsonschema.validate(report, _schema())
    assert report["schema_version"] == REPORT_SCHEMA_VERSION


def test_the_passing_report_validates_against_the_shipped_schema(passing_run: Path) -> None:
    report = json.loads((passing_run / "report.json").read_text())
    jsonschema.validate(report, _schema())
    assert report["verdict"] == "pass"
    assert report["counterexample"] is None


def test_the_schema_rejects_a_report_without_its_verdict(failing_run: tuple[Path, str]) -> None:
    report = json.loads((failing_run[0] / "report.json").read_text())
    del report["verdict"]
    with pytest.raises(jsonschema.ValidationError, match="verdict"):
        jsonschema.validate(report, _schema())


def test_the_fields_scripts_rely_on_are_all_still_there(failing_run: tuple[Path, str]) -> None:
    report = json.loads((failing_run[0] / "report.json").read_text())
    assert report["verdict"] == "fail"
    assert report["seed"] == 0
    assert report["scenarios"] > 0
    assert {"name", "verdict", "witness"} <= set(report["properties"][0])
    assert report["faults"]["effect_boundary"]["fired"] > 0
    assert report["counterexample"]["steps"] and report["counterexample"]["replay"]
    assert report["adapter"]["spec"] == "broken_runtime:BrokenAdapter"
    assert report["adapter"]["options"] == {}
    assert report["other_failures"] == [] or "steps" in report["other_failures"][0]


def test_fault_coverage_counts_runs_survived_and_failed_after(
    failing_run: tuple[Path, str],
) -> None:
    faults = Report.model_validate_json((failing_run[0] / "report.json").read_text()).faults
    boundary = faults["effect_boundary"]
    assert 0 < boundary.scenarios <= boundary.fired
    assert boundary.failed_after > 0, "the kill after the charge is what breaks the runtime"
    assert boundary.survived + boundary.failed_after == boundary.scenarios


def test_every_declared_crash_point_has_a_row_and_some_fired(passing_run: Path) -> None:
    report = Report.model_validate_json((passing_run / "report.json").read_text())
    assert len(report.crash_points) >= 20, sorted(report.crash_points)
    fired = {site: c for site, c in report.crash_points.items() if c.fired}
    assert fired, "no crash point fired in the run"
    assert all(c.survived == c.scenarios and c.failed_after == 0 for c in fired.values())
    assert sum(c.fired for c in report.crash_points.values()) == report.faults["crash_point"].fired


def test_harness_report_reproduces_every_format_but_names_its_adapter_as_data(
    run_copy: Path,
) -> None:
    before = {name: (run_copy / name).read_bytes() for name in REPORT_FILES}
    for name in REPORT_FILES:
        (run_copy / name).unlink() if name != "report.json" else None
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the stored verdict is a failure
    # The same bytes, but the replay commands: the folder is data that may
    # come from anyone, so the re-rendered command names the stored adapter
    # (not built in) as data, never as a command to run.
    def without_replays(data: bytes) -> list[bytes]:
        return [line for line in data.splitlines() if b"replay" not in line]

    for name in REPORT_FILES:
        after = (run_copy / name).read_bytes()
        assert without_replays(after) == without_replays(before[name]), name
    assert b"--trust-adapter" in (run_copy / "summary.md").read_bytes()


def test_the_report_json_text_round_trips_through_the_model(failing_run: tuple[Path, str]) -> None:
    text = (failing_run[0] / "report.json").read_text()
    assert Report.model_validate_json(text).to_json() == text


def test_a_schema_2_report_still_loads_and_renders(run_copy: Path) -> None:
    """Reports written before verdicts were earned over the search (schema 2:
    no not_tested, no inconclusive, no plan) still load and re-render."""
    raw = json.loads((run_copy / "report.json").read_text())
    raw["schema_version"] = 2
    for key in ("inconclusive", "planned_scenarios", "searched_scenarios", "families"):
        raw.pop(key)
    for p in raw["properties"]:
        for key in ("reason", "exercised", "scenarios", "counterexample"):
            p.pop(key)
        if p["verdict"] == "not_tested":
            p["verdict"] = "unknown"  # what schema 2 said for a missing capability
    for other in raw["other_failures"]:
        other.pop("counterexample_for")
        other.pop("replay")
    raw["counterexample"].pop("counterexample_for")
    (run_copy / "report.json").write_text(json.dumps(raw))
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: FAIL" in proc.stdout
    assert "not_tested" not in (run_copy / "junit.xml").read_text()
