"""Replay trusts nothing a report folder says (issue 13, defects 1 and 9).

A run folder is a CI artifact people download to look at a failure: its
``report.json`` must not make ``harness replay`` import and call code, nor
``harness report`` read files outside the folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine_support import BROKEN, harness_cli, replay_argv


def _edit(folder: Path, **changes: object) -> dict[str, object]:
    report = json.loads((folder / "report.json").read_text())
    for dotted, value in changes.items():
        where = report
        *parents, last = dotted.split("__")
        for key in parents:
            where = where[key]
        where[last] = value
    (folder / "report.json").write_text(json.dumps(report))
    return report


def test_replay_does_not_import_what_a_report_names(run_copy: Path) -> None:
    pwned = run_copy / "PWNED.txt"
    _edit(
        run_copy,
        adapter__spec="os:system",
        adapter__options={"command": f"id > {pwned}"},
    )
    proc = harness_cli("replay", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "records adapter 'os:system', which is not built in" in proc.stderr
    assert "--trust-adapter" in proc.stderr
    assert not pwned.exists(), "replay ran the command a report folder named"
    assert "Traceback" not in proc.stderr


def test_the_printed_replay_command_names_the_adapter_and_works_as_is(run_copy: Path) -> None:
    report = json.loads((run_copy / "report.json").read_text())
    command = report["counterexample"]["replay"]
    assert f"--adapter {BROKEN}" in command
    argv = replay_argv(command)
    argv[1] = str(run_copy)  # the command names the original folder
    proc = harness_cli(*argv, cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "reproduced: exactly_once_effects" in proc.stdout


def test_trust_adapter_imports_the_recorded_one_and_says_what_it_imports(run_copy: Path) -> None:
    proc = harness_cli("replay", str(run_copy), "--trust-adapter", cwd=run_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"importing the recorded adapter (--adapter {BROKEN})" in proc.stdout


def test_a_report_cannot_point_outside_its_folder(run_copy: Path) -> None:
    _edit(run_copy, counterexample__history="/etc/passwd")
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not a path inside the report folder" in proc.stderr
    assert "root:" not in (run_copy / "report.html").read_text()


def test_a_property_counterexample_cannot_climb_out_of_the_folder(run_copy: Path) -> None:
    report = json.loads((run_copy / "report.json").read_text())
    for p in report["properties"]:
        if p["verdict"] == "fail":
            p["counterexample"] = "../../.."
    (run_copy / "report.json").write_text(json.dumps(report))
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not a path inside the report folder" in proc.stderr


def test_a_report_with_a_negative_schema_version_is_refused(run_copy: Path) -> None:
    _edit(run_copy, schema_version=-1)
    proc = harness_cli("report", str(run_copy), cwd=run_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "schema_version -1, below 0" in proc.stderr
