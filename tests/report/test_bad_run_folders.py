"""``harness report`` and ``harness replay`` on bad input: a clear message, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_support import harness_cli


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_missing_folder_is_refused_with_exit_2(command: str, tmp_path: Path) -> None:
    proc = harness_cli(command, str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a folder" in proc.stderr


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_folder_without_report_json_is_refused_with_exit_2(command: str, tmp_path: Path) -> None:
    proc = harness_cli(command, str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "report.json is missing" in proc.stderr


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_corrupt_report_json_is_refused_with_exit_2(command: str, run_copy: Path) -> None:
    (run_copy / "report.json").write_text('{"verdict": "fail", ')
    proc = harness_cli(command, str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "report.json is corrupt" in proc.stderr
    assert "run `harness run --report-dir DIR` again" in proc.stderr


def test_a_report_that_breaks_the_schema_names_the_bad_field(run_copy: Path) -> None:
    report = json.loads((run_copy / "report.json").read_text())
    report["scenarios"] = "many"
    (run_copy / "report.json").write_text(json.dumps(report))
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a valid report: scenarios" in proc.stderr


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_report_from_a_newer_schema_asks_for_an_upgrade(command: str, run_copy: Path) -> None:
    report = json.loads((run_copy / "report.json").read_text())
    report["schema_version"] = 99
    report["something_new"] = {"a": 1}
    (run_copy / "report.json").write_text(json.dumps(report))
    proc = harness_cli(command, str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "newer harness (report schema 99" in proc.stderr
    assert "upgrade stateful-agent-harness" in proc.stderr


def test_replay_without_the_scenario_names_the_missing_file(run_copy: Path) -> None:
    (run_copy / "scenario.json").unlink()
    proc = harness_cli("replay", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "scenario.json is missing" in proc.stderr


def test_a_report_renders_without_its_history_and_says_so(run_copy: Path) -> None:
    (run_copy / "history.jsonl").unlink()
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    html = (run_copy / "report.html").read_text()
    assert "history of this scenario was not kept" in html


@pytest.mark.parametrize(
    ("command", "name"),
    [("report", "report.json"), ("replay", "report.json"), ("replay", "scenario.json")],
)
def test_a_run_file_that_cannot_be_read_is_refused_with_exit_2(
    command: str, name: str, run_copy: Path
) -> None:
    """Found by the CLI fuzz: a report.json that is a directory escaped as an
    IsADirectoryError traceback from ``harness report``."""
    (run_copy / name).unlink()
    (run_copy / name).mkdir()
    proc = harness_cli(command, str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{run_copy / name} is a folder, not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_deeply_nested_report_json_is_refused_with_exit_2(command: str, run_copy: Path) -> None:
    (run_copy / "report.json").write_text("[" * 100_000 + "]" * 100_000)
    proc = harness_cli(command, str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
