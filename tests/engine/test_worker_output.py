"""A failing scenario keeps what its workers printed, beside its history,
and the HTML report links it (issue 12: a worker's traceback used to be
deleted with the scenario's folder)."""

from __future__ import annotations

from pathlib import Path

from check_adapters import CHATTY
from engine_support import harness_cli_at_root as harness_cli


def test_a_failing_scenario_keeps_its_workers_output_and_the_report_links_it(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r"
    proc = harness_cli(
        "run",
        "--adapter",
        "check_adapters:ChattyToy",
        "--adapter-opt",
        "keyed=false",
        "--profile",
        "dev",
        "--report-dir",
        str(report),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = (report / "workers.log").read_text()
    assert CHATTY in log
    assert log.startswith("==> env/")  # each log under a header naming it
    html = (report / "report.html").read_text()
    assert '<a href="workers.log">workers.log</a>' in html


def test_a_passing_run_keeps_no_worker_output(tmp_path: Path) -> None:
    report = tmp_path / "r"
    proc = harness_cli(
        "run",
        "--adapter",
        "check_adapters:ChattyToy",
        "--profile",
        "dev",
        "--report-dir",
        str(report),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (report / "workers.log").exists()
    assert "workers.log" not in (report / "report.html").read_text()
